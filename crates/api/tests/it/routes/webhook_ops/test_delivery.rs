//! `POST /webhooks/{id}/test`: one signed delivery at once, never retried, logged, and
//! limited to five a minute per subscription.

use std::sync::Arc;

use posture_domain::signature::{verify, verify_standard};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Ops, header, hook, receiver};
use crate::support::{TestApp, assert_error, test_keyring};

async fn test(ops: &Ops, webhook: &str, body: Value) -> Value {
    ops.json(
        Method::POST,
        &format!("/webhooks/{webhook}/test"),
        Some(body),
        StatusCode::OK,
    )
    .await["data"]
        .clone()
}

#[tokio::test]
async fn a_ping_is_signed_both_ways_sent_at_once_and_logged_as_a_test() {
    let ops = Ops::new().await;
    let server = receiver(200).await;
    let (webhook, secret) = ops
        .subscribe(&hook(&server), "generic", &["finding_high"])
        .await;
    let result = test(&ops, &webhook, json!({})).await;
    assert_eq!(result["delivered"], true);
    assert_eq!(result["statusCode"], 200);
    assert_eq!(result["error"], Value::Null);
    assert!(result["latencyMs"].is_u64());
    let id = result["deliveryId"].as_str().unwrap();

    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1, "sent before the answer");
    let request = &requests[0];
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["type"], "ping");
    assert_eq!(body["test"], true);
    assert_eq!(body["id"], id);
    assert_eq!(body["data"]["findings"], json!([]));
    assert!(body.get("analyzerPassId").is_none(), "no pass: {body}");
    assert_eq!(header(request, "x-service-event"), "ping");
    assert!(verify(
        &secret,
        &request.body,
        header(request, "x-service-signature-256")
    ));
    let timestamp: i64 = header(request, "webhook-timestamp").parse().unwrap();
    assert!(verify_standard(
        &secret,
        id,
        timestamp,
        &request.body,
        header(request, "webhook-signature")
    ));

    let log = ops.log(&webhook).await;
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["id"], id);
    assert_eq!(log[0]["trigger"], "test");
    assert_eq!(log[0]["eventType"], "ping");
    assert_eq!(log[0]["status"], "delivered");
    assert_eq!(log[0]["attempts"], 1);
    assert_eq!(log[0]["findingCount"], 0);
    assert_eq!(ops.app.db.assert_delivery_totals().await, 1);
}

#[tokio::test]
async fn an_event_type_of_null_is_a_ping_as_the_contract_says() {
    let ops = Ops::new().await;
    let server = receiver(200).await;
    let (webhook, _) = ops
        .subscribe(&hook(&server), "generic", &["finding_high"])
        .await;
    let result = test(&ops, &webhook, json!({ "eventType": null })).await;
    assert_eq!(result["delivered"], true);
    let requests = server.received_requests().await.unwrap();
    let body: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(body["type"], "ping");
}

#[tokio::test]
async fn a_test_of_an_event_type_carries_one_sample_finding_rendered_for_the_receiver() {
    let ops = Ops::new().await;
    let generic = receiver(204).await;
    let slack = receiver(200).await;
    let teams = receiver(202).await;
    let (generic_hook, _) = ops
        .subscribe(&hook(&generic), "generic", &["finding_low"])
        .await;
    let (slack_hook, _) = ops
        .subscribe(&hook(&slack), "slack", &["finding_low"])
        .await;
    let (teams_hook, _) = ops
        .subscribe(&hook(&teams), "teams", &["finding_low"])
        .await;
    for webhook in [&generic_hook, &slack_hook, &teams_hook] {
        let result = test(&ops, webhook, json!({"eventType": "finding_critical"})).await;
        assert_eq!(result["delivered"], true, "{result}");
    }
    let body: Value =
        serde_json::from_slice(&generic.received_requests().await.unwrap()[0].body).unwrap();
    assert_eq!(body["type"], "finding_critical");
    assert_eq!(body["test"], true);
    let findings = body["data"]["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0]["severity"], "critical");
    assert_eq!(findings[0]["id"], "sample-critical");
    for server in [&slack, &teams] {
        let text =
            String::from_utf8(server.received_requests().await.unwrap()[0].body.clone()).unwrap();
        assert!(text.contains("test: 1 new critical finding"), "{text}");
    }
    assert_eq!(ops.log(&generic_hook).await[0]["findingCount"], 1);
}

#[tokio::test]
async fn a_refusing_or_unreachable_receiver_is_a_200_saying_so_and_is_never_retried() {
    let ops = Ops::new().await;
    let server = receiver(503).await;
    let (webhook, _) = ops
        .subscribe(&hook(&server), "generic", &["finding_high"])
        .await;
    let refused = test(&ops, &webhook, json!({})).await;
    assert_eq!(refused["delivered"], false);
    assert_eq!(refused["statusCode"], 503);
    assert_eq!(refused["error"], "HTTP 503");
    assert_eq!(ops.log(&webhook).await[0]["status"], "failed");

    let (closed, _) = ops
        .subscribe("http://127.0.0.1:9/closed", "generic", &["finding_high"])
        .await;
    let unreachable = test(&ops, &closed, json!({})).await;
    assert_eq!(unreachable["delivered"], false);
    assert_eq!(unreachable["statusCode"], Value::Null);
    // Coarse: a closed port and a name that only resolves elsewhere read alike, so the test
    // endpoint maps nothing behind a receiver's address.
    assert_eq!(
        unreachable["error"],
        posture_delivery::UNREACHABLE,
        "{unreachable}"
    );
    let (nowhere, _) = ops
        .subscribe(
            "http://no-such-host.invalid/hook",
            "generic",
            &["finding_high"],
        )
        .await;
    let nowhere = test(&ops, &nowhere, json!({})).await;
    assert_eq!(nowhere["error"], unreachable["error"], "{nowhere}");
    assert_eq!(
        ops.worker(3).drain().await.unwrap(),
        0,
        "a test is never retried"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_test_keeps_the_egress_rules_of_every_delivery() {
    let app = TestApp::strict_webhooks().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app
        .key(customer, &[posture_domain::Scope::ManageWebhooks])
        .await;
    // Stored as a subscription before the rules refused such URLs at creation.
    let (webhook, _) = posture_test_support::fixtures::subscription(
        &app.store,
        &test_keyring(),
        customer,
        "http://127.0.0.1:9/internal",
        "generic",
        &["finding_high"],
    )
    .await;
    let response = app
        .client
        .post(app.url(&format!("/api/v1/webhooks/{webhook}/test")))
        .bearer_auth(&key)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let result: Value = response.json().await.unwrap();
    assert_eq!(result["data"]["delivered"], false);
    assert!(
        result["data"]["error"]
            .as_str()
            .unwrap()
            .starts_with("refused"),
        "{result}"
    );
}

#[tokio::test]
async fn tests_are_limited_to_five_a_minute_per_subscription() {
    let ops = Ops::new().await;
    let server = Arc::new(receiver(204).await);
    let (webhook, _) = ops
        .subscribe(&hook(&server), "generic", &["finding_high"])
        .await;
    let (other, _) = ops
        .subscribe(&hook(&server), "generic", &["finding_high"])
        .await;
    for _ in 0..5 {
        test(&ops, &webhook, json!({})).await;
    }
    let limited = ops
        .call(
            Method::POST,
            &format!("/webhooks/{webhook}/test"),
            Some(json!({})),
        )
        .await;
    let retry_after: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after));
    let reason = assert_error(limited, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    assert!(reason.contains("5 a minute"), "{reason}");
    assert_eq!(server.received_requests().await.unwrap().len(), 5);
    test(&ops, &other, json!({})).await;
}

#[tokio::test]
async fn a_bad_test_request_is_refused_naming_the_problem() {
    let ops = Ops::new().await;
    let (webhook, _) = ops
        .subscribe("http://127.0.0.1:9/hook", "generic", &["finding_high"])
        .await;
    let path = format!("/webhooks/{webhook}/test");
    for (body, names) in [
        (json!({"eventType": "finding_urgent"}), "eventType"),
        (json!({"eventType": 3}), "eventType"),
        (json!({"eventType": "ping", "url": "x"}), "url"),
    ] {
        let response = ops.call(Method::POST, &path, Some(body.clone())).await;
        let reason = assert_error(
            response,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unprocessable_entity",
        )
        .await;
        assert!(reason.contains(names), "{body}: {reason}");
    }
    let missing = ops
        .call(
            Method::POST,
            "/webhooks/00000000-0000-4000-8000-000000000000/test",
            Some(json!({})),
        )
        .await;
    assert_error(missing, StatusCode::NOT_FOUND, "not_found").await;
    assert!(ops.log(&webhook).await.is_empty(), "nothing was sent");
}

#[tokio::test]
async fn a_test_of_a_lifecycle_event_carries_a_sample_finding_with_its_change() {
    let ops = Ops::new().await;
    let server = receiver(200).await;
    let (webhook, _) = ops
        .subscribe(&hook(&server), "generic", &["finding_resolved"])
        .await;
    let result = test(&ops, &webhook, json!({"eventType": "finding_resolved"})).await;
    assert_eq!(result["delivered"], true);
    let body: Value =
        serde_json::from_slice(&server.received_requests().await.unwrap()[0].body).unwrap();
    assert_eq!(body["type"], "finding_resolved");
    let finding = &body["data"]["findings"][0];
    // docs/webhooks.md: a lifecycle type's sample is the high one.
    assert_eq!(finding["id"], "sample-high");
    assert_eq!(finding["status"], "resolved");
    assert_eq!(
        finding["change"],
        json!({"field": "status", "from": "open", "to": "resolved"})
    );
}
