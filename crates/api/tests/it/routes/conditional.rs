//! Conditional reads: a weak `ETag` on every read but the export, 304 when `If-None-Match`
//! holds it (no body, not counted against the key's quota), a new tag once anything the
//! route shows changes.

use std::{sync::Arc, time::Duration};

use posture_domain::{
    Scope, clock::Clock as _, ports::DataVersionRepository as _, rate_limit::RatePolicy,
};
use posture_http::TrustedProxies;
use posture_test_support::{fixtures::finding, waits::wait_for};
use reqwest::{Response, StatusCode};
use serde_json::json;

use crate::support::TestApp;

/// The reads a conditional client polls (every GET of `/api/v1` but the export, and a
/// finding's detail, whose tag is strong: `routes/triage.rs`).
const READS: [&str; 9] = [
    "/api/v1/findings?severity=critical",
    "/api/v1/findings/f1/triage",
    "/api/v1/identities",
    "/api/v1/identities/u1",
    "/api/v1/roles",
    "/api/v1/tenants",
    "/api/v1/upr",
    "/api/v1/upr/principals",
    "/api/v1/webhooks",
];

async fn conditional(app: &TestApp, path: &str, key: &str, tag: &str) -> Response {
    app.client
        .get(app.url(path))
        .bearer_auth(key)
        .header("If-None-Match", tag)
        .send()
        .await
        .unwrap()
}

fn etag(response: &Response) -> String {
    response
        .headers()
        .get("etag")
        .unwrap_or_else(|| panic!("{}: no ETag", response.url()))
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn every_read_answers_a_weak_etag_and_304_while_it_matches() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer_with_one_of_each("A").await;
    let key = app.key_with_every_scope(customer).await;
    for path in READS {
        let first = app.get(path, &key).await;
        assert_eq!(first.status(), StatusCode::OK, "{path}");
        let tag = etag(&first);
        assert!(
            tag.starts_with("W/\"") && tag.ends_with('"'),
            "{path}: {tag}"
        );
        let again = conditional(&app, path, &key, &tag).await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{path}");
        assert_eq!(etag(&again), tag, "{path}");
        for header in ["x-ratelimit-limit", "x-ratelimit-remaining", "ratelimit"] {
            assert!(again.headers().contains_key(header), "{path}: no {header}");
        }
        assert_eq!(again.headers()["cache-control"], "no-store");
        assert!(
            again.text().await.unwrap().is_empty(),
            "{path}: a 304 has no body"
        );
        // Among other tags.
        let list = format!("W/\"other\", {tag}");
        assert_eq!(
            conditional(&app, path, &key, &list).await.status(),
            StatusCode::NOT_MODIFIED,
            "{path}"
        );
        // A tag that is not this one, not a tag at all, or `*` (a tag must have been
        // received): the full answer.
        for other in ["W/\"other\"", "not a tag", "\"\"", "*"] {
            let response = conditional(&app, path, &key, other).await;
            assert_eq!(response.status(), StatusCode::OK, "{path} {other}");
        }
    }
}

#[tokio::test]
async fn a_304_does_not_count_against_the_keys_quota() {
    let limiter = || {
        Arc::new(crate::harness::held_limiter(RatePolicy {
            limit: 3,
            window_secs: 900,
        })) as Arc<dyn posture_domain::rate_limit::RateLimiter>
    };
    let app = TestApp::with_limiter(limiter, TrustedProxies::default()).await;
    let (customer, _) = app.customer_with_one_of_each("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadFindings]).await;
    let first = app.get("/api/v1/findings", &key).await;
    assert_eq!(first.headers()["x-ratelimit-remaining"], "2");
    let tag = etag(&first);
    for _ in 0..10 {
        let response = conditional(&app, "/api/v1/findings", &key, &tag).await;
        assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(response.headers()["x-ratelimit-remaining"], "2");
    }
    let counted = app.get("/api/v1/findings", &key).await;
    assert_eq!(counted.status(), StatusCode::OK);
    assert_eq!(counted.headers()["x-ratelimit-remaining"], "1");
}

/// Polls until the read's tag is no longer `tag` (the change reaches this server's version
/// cache through `NOTIFY`); fails if that takes a second.
async fn changes_within_a_second(app: &TestApp, path: &str, key: &str, tag: &str) -> String {
    let what = format!("{path}: the change reaching the tag");
    let new = wait_for(&what, Duration::from_secs(1), || async {
        let response = conditional(app, path, key, tag).await;
        if response.status() != StatusCode::OK {
            assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
            return None;
        }
        Some(etag(&response))
    })
    .await;
    assert_ne!(new, tag);
    new
}

#[tokio::test]
async fn a_pass_a_webhook_change_or_a_new_tenant_gives_a_new_tag() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer_with_one_of_each("A").await;
    let key = app.key_with_every_scope(customer).await;
    app.key_cache_live().await;
    let tag = etag(&app.get("/api/v1/findings", &key).await);
    app.ingest_unheard(customer, &[finding("f2", &tenant, "low", "open", "u1")])
        .await;
    let tag = changes_within_a_second(&app, "/api/v1/findings", &key, &tag).await;

    let webhooks = etag(&app.get("/api/v1/webhooks", &key).await);
    let created = app
        .client
        .post(app.url("/api/v1/webhooks"))
        .bearer_auth(&key)
        .json(
            &json!({"name": "SIEM", "webhookUrl": "https://hooks.example.com/p",
                      "webhookType": "generic", "eventTypes": ["finding_critical"]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    changes_within_a_second(&app, "/api/v1/webhooks", &key, &webhooks).await;

    let tenants = etag(&app.get("/api/v1/tenants", &key).await);
    let new_tenant = uuid::Uuid::new_v4().to_string();
    app.ingest_unheard(
        customer,
        &[posture_test_support::fixtures::tenant(
            &new_tenant,
            "Second",
        )],
    )
    .await;
    changes_within_a_second(&app, "/api/v1/tenants", &key, &tenants).await;
    // Unchanged data since the last tag: still 304.
    let tag_now = etag(&app.get("/api/v1/findings", &key).await);
    assert_ne!(tag_now, tag, "the tenant pass is a pass too");
    assert_eq!(
        conditional(&app, "/api/v1/findings", &key, &tag_now)
            .await
            .status(),
        StatusCode::NOT_MODIFIED
    );
}

#[tokio::test]
async fn a_tag_is_bound_to_its_key_and_query() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer_with_one_of_each("A").await;
    let key = app.key_with_every_scope(customer).await;
    let other_key = app.key_with_every_scope(customer).await;
    let tag = etag(&app.get("/api/v1/findings?limit=5", &key).await);
    for (path, key) in [
        ("/api/v1/findings?limit=5", &other_key),
        ("/api/v1/findings?limit=6", &key),
        ("/api/v1/findings", &key),
        ("/api/v1/identities?limit=5", &key),
    ] {
        let response = conditional(&app, path, key, &tag).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
    }
    // The same query in another order is the same request.
    let (other_customer, _) = app.customer_with_one_of_each("B").await;
    let key_b = app.key_with_every_scope(other_customer).await;
    let tag = etag(
        &app.get("/api/v1/findings?limit=5&severity=critical", &key_b)
            .await,
    );
    assert_eq!(
        conditional(
            &app,
            "/api/v1/findings?severity=critical&limit=5",
            &key_b,
            &tag
        )
        .await
        .status(),
        StatusCode::NOT_MODIFIED
    );
}

#[tokio::test]
async fn the_export_is_never_conditional() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer_with_one_of_each("A").await;
    let key = app.key_with_every_scope(customer).await;
    let response = app.get("/api/v1/findings/export", &key).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("etag").is_none());
    let again = conditional(&app, "/api/v1/findings/export", &key, "*").await;
    assert_eq!(again.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_key_without_the_scope_gets_403_whatever_tag_it_sends() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer_with_one_of_each("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    for tag in ["W/\"guess\"", "*"] {
        let response = conditional(&app, "/api/v1/findings", &key, tag).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{tag}");
        assert!(response.headers().get("etag").is_none());
    }
}

/// A triage mark reads `untriaged` from its `expiresAt` on, before the worker's sweep records
/// it (no worker runs here): the lists' tag changes when it passes, not when it is recorded.
#[tokio::test]
async fn a_tag_changes_when_a_triage_mark_expires_before_the_sweep_records_it() {
    let app = TestApp::with_clock().await;
    let (customer, tenant) = app.customer_with_one_of_each("A").await;
    app.ingest(customer, &[finding("f2", &tenant, "high", "open", "u1")])
        .await;
    let key = app.key_with_every_scope(customer).await;
    app.key_cache_live().await;
    let before = app.store.data_version(customer).await.unwrap().changes;
    let expires = |minutes| {
        (app.clock().now() + chrono::Duration::minutes(minutes))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    for (id, minutes) in [("f1", 10), ("f2", 20)] {
        let written = app
            .client
            .patch(app.url(&format!("/api/v1/findings/{id}")))
            .bearer_auth(&key)
            .json(
                &json!({"triage": {"state": "risk_accepted", "reason": "compensating_control",
                                     "expiresAt": expires(minutes)}}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(written.status(), StatusCode::OK, "{id}");
    }
    // Both writes heard by the server's version cache (each bumps the version once).
    let store = &app.store;
    posture_test_support::waits::wait_for(
        "the server serving the writes' data version",
        Duration::from_secs(20),
        || async move {
            (store.data_version(customer).await.unwrap().changes >= before + 2).then_some(())
        },
    )
    .await;
    let path = "/api/v1/findings?triageState=risk_accepted";
    let ids = |body: serde_json::Value| -> Vec<String> {
        let mut ids: Vec<String> = body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let first = app.get(path, &key).await;
    let tag = etag(&first);
    assert_eq!(ids(first.json().await.unwrap()), ["f1", "f2"]);
    app.clock().advance(Duration::from_secs(5 * 60));
    assert_eq!(
        conditional(&app, path, &key, &tag).await.status(),
        StatusCode::NOT_MODIFIED,
        "nothing expired yet"
    );

    // f1's mark expires: a new tag and a list without it, then 304 on that tag.
    app.clock().advance(Duration::from_secs(5 * 60));
    let after_f1 = conditional(&app, path, &key, &tag).await;
    assert_eq!(after_f1.status(), StatusCode::OK, "f1's mark expired");
    let tag_after_f1 = etag(&after_f1);
    assert_ne!(tag_after_f1, tag);
    assert_eq!(ids(after_f1.json().await.unwrap()), ["f2"]);
    assert_eq!(
        conditional(&app, path, &key, &tag_after_f1).await.status(),
        StatusCode::NOT_MODIFIED
    );

    // f2's, ten minutes later: another tag, an empty list.
    app.clock().advance(Duration::from_secs(10 * 60));
    let after_f2 = conditional(&app, path, &key, &tag_after_f1).await;
    assert_eq!(after_f2.status(), StatusCode::OK, "f2's mark expired");
    let tag_after_f2 = etag(&after_f2);
    assert!(ids(after_f2.json().await.unwrap()).is_empty());
    assert!(tag_after_f2 != tag && tag_after_f2 != tag_after_f1);
    assert_eq!(
        conditional(&app, path, &key, &tag_after_f2).await.status(),
        StatusCode::NOT_MODIFIED
    );
}
