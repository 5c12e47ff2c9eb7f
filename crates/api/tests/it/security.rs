//! What customers' own systems and keys can do to posture (issue 34's review), each class of
//! input with its guard: a receiver's answer is made storable, test deliveries are bounded
//! per customer and say only coarse outcomes, webhook ports are limited, a customer's keys
//! share one budget, and every change of a signing secret changes the subscription's tag.

use posture_domain::Scope;
use reqwest::{Method, StatusCode, header};
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

use crate::{
    routes::webhook_ops::{Ops, hook},
    support::TestApp,
};

#[tokio::test]
async fn a_receiver_answering_a_nul_byte_gets_a_recorded_test_not_a_500() {
    let ops = Ops::new().await;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(502).set_body_bytes(b"bad\x00byte".to_vec()))
        .mount(&server)
        .await;
    let (webhook, _) = ops
        .subscribe(&hook(&server), "generic", &["finding_high"])
        .await;
    let tested = ops
        .json(
            Method::POST,
            &format!("/webhooks/{webhook}/test"),
            Some(json!({})),
            StatusCode::OK,
        )
        .await;
    assert_eq!(tested["data"]["statusCode"], 502, "{tested}");
    assert_eq!(ops.log(&webhook).await.len(), 1, "the test is in the log");
}

#[tokio::test]
async fn test_deliveries_are_bounded_per_customer_whatever_its_subscriptions() {
    let ops = Ops::new().await;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&server)
        .await;
    let mut sent = 0;
    let mut refused = None;
    // Five subscriptions of five tests each would be 25: the customer's 20 come first.
    'subscriptions: for _ in 0..5 {
        let (webhook, _) = ops
            .subscribe(&hook(&server), "generic", &["finding_high"])
            .await;
        for _ in 0..5 {
            let response = ops
                .call(Method::POST, &format!("/webhooks/{webhook}/test"), None)
                .await;
            if response.status() == StatusCode::TOO_MANY_REQUESTS {
                assert!(response.headers().contains_key(header::RETRY_AFTER));
                refused = Some(response.json::<Value>().await.unwrap());
                break 'subscriptions;
            }
            assert_eq!(response.status(), StatusCode::OK);
            sent += 1;
        }
    }
    assert_eq!(sent, 20);
    let refused = refused.expect("the 21st test is refused");
    assert!(
        refused["reason"].as_str().unwrap().contains("per customer"),
        "{refused}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 20);
}

#[tokio::test]
async fn a_webhook_may_use_port_443_or_an_unprivileged_port_only() {
    let app = TestApp::strict_webhooks().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ManageWebhooks]).await;
    let create = |url: &'static str| {
        app.client
            .post(app.url("/api/v1/webhooks"))
            .bearer_auth(&key)
            .json(
                &json!({"name": "p", "webhookUrl": url, "webhookType": "generic",
                          "eventTypes": ["finding_high"]}),
            )
            .send()
    };
    for url in [
        "https://hooks.example.com:22/x",
        "https://hooks.example.com:25/x",
        "https://hooks.example.com:1023/x",
    ] {
        let response = create(url).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY, "{url}");
        let body: Value = response.json().await.unwrap();
        assert!(body["reason"].as_str().unwrap().contains("port"), "{body}");
    }
    for url in [
        "https://hooks.example.com/x",
        "https://hooks.example.com:8443/x",
    ] {
        assert_eq!(
            create(url).await.unwrap().status(),
            StatusCode::CREATED,
            "{url}"
        );
    }
}

#[tokio::test]
async fn a_customers_keys_share_one_budget_and_its_refusal_describes_it() {
    let app = TestApp::with_customer_limit(5, 8).await;
    let (customer, _) = app.customer("A").await;
    let (_, first) = app.key(customer, &[Scope::ReadIdentities]).await;
    let (_, second) = app.key(customer, &[Scope::ReadIdentities]).await;
    for _ in 0..5 {
        assert_eq!(
            app.get("/api/v1/tenants", &first).await.status(),
            StatusCode::OK
        );
    }
    assert_eq!(
        app.get("/api/v1/tenants", &first).await.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "the key's own limit"
    );
    // The first key's refused request was not the customer's to count: 5 + 3 = 8.
    for _ in 0..3 {
        let response = app.get("/api/v1/tenants", &second).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()["ratelimit-policy"],
            "\"per-key\";q=5;w=900"
        );
    }
    let refused = app.get("/api/v1/tenants", &second).await;
    assert_eq!(
        refused.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "the customer's budget"
    );
    assert_eq!(
        refused.headers()["ratelimit-policy"],
        "\"per-customer\";q=8;w=900"
    );
    assert_eq!(refused.headers()["x-ratelimit-limit"], "8");
    assert_eq!(refused.headers()["x-ratelimit-remaining"], "0");
    assert!(refused.headers().contains_key(header::RETRY_AFTER));
    // Another customer is not affected.
    let (other, _) = app.customer("B").await;
    let (_, theirs) = app.key(other, &[Scope::ReadIdentities]).await;
    assert_eq!(
        app.get("/api/v1/tenants", &theirs).await.status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn every_change_of_the_secret_changes_the_tag_even_without_an_overlap() {
    let ops = Ops::new().await;
    let (webhook, _) = ops
        .subscribe("https://hooks.example.com/r", "generic", &["finding_high"])
        .await;
    let read = ops
        .call(Method::GET, &format!("/webhooks/{webhook}"), None)
        .await;
    let tag = read.headers()[header::ETAG].to_str().unwrap().to_owned();
    let rotate = || {
        ops.app
            .client
            .post(
                ops.app
                    .url(&format!("/api/v1/webhooks/{webhook}/rotate-secret")),
            )
            .bearer_auth(&ops.key)
            .header(header::IF_MATCH, &tag)
            .json(&json!({"gracePeriodSeconds": 0}))
            .send()
    };
    let first = rotate().await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_ne!(first.headers()[header::ETAG].to_str().unwrap(), tag);
    let second = rotate().await.unwrap();
    assert_eq!(
        second.status(),
        StatusCode::PRECONDITION_FAILED,
        "the first caller's secret is not silently replaced"
    );
}
