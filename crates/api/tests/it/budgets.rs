//! The customers' budgets over a window (docs/operations.md, "Fair shares"): what triage
//! writes add to storage, SCIM writes. A refusal is a 429 whose rate-limit headers name the
//! budget that refused, first, and the key's after it; a write the byte budget refuses costs
//! it nothing.

use std::sync::Arc;

use posture_domain::{
    Scope,
    rate_limit::{RateLimiter, RatePolicy},
};
use posture_http::Budgets;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::{
    scim::{Scim, assert_scim_error},
    support::{TestApp, assert_error},
};

/// A budget of `policy` on a clock nobody moves: a window never turns over between a
/// test's writes (on the system clock it could, and the refusal would not come).
fn limited(policy: RatePolicy) -> Arc<dyn RateLimiter> {
    Arc::new(crate::harness::held_limiter(policy))
}

/// The header's value, as text.
fn header(response: &reqwest::Response, name: &str) -> String {
    response.headers()[name].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn triage_writes_past_what_they_may_add_to_storage_are_refused_naming_that_budget() {
    let app = TestApp::with_budgets(|budgets| Budgets {
        // 5 KiB an hour: a write of 3 findings and a comment of 1,000 bytes costs 4,072.
        triage_bytes: limited(RatePolicy {
            limit: 5120,
            window_secs: 3600,
        }),
        ..budgets
    })
    .await;
    let (customer, tenant) = app.customer_with_one_of_each("A").await;
    let findings: Vec<_> = ["f1", "f2", "f3"]
        .iter()
        .map(|id| posture_test_support::fixtures::finding(id, &tenant, "high", "open", "u1"))
        .collect();
    app.ingest(customer, &findings).await;
    let (_, key) = app
        .key(customer, &[Scope::ReadFindings, Scope::WriteFindings])
        .await;
    let bulk = json!({
        "findings": [{"id": "f1"}, {"id": "f2"}, {"id": "f3"}],
        "triage": {"state": "acknowledged", "comment": "x".repeat(1000)},
    });
    let post = || {
        app.client
            .post(app.url("/api/v1/findings/triage"))
            .bearer_auth(&key)
            .json(&bulk)
            .send()
    };
    assert_eq!(post().await.unwrap().status(), StatusCode::OK);
    let refused = post().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(header(&refused, "retry-after").parse::<u64>().unwrap() >= 1);
    assert_eq!(header(&refused, "x-ratelimit-limit"), "5120");
    assert_eq!(header(&refused, "x-ratelimit-remaining"), "1048");
    let policies = header(&refused, "ratelimit-policy");
    assert!(
        policies.starts_with("\"triage-bytes-per-customer\";q=5120;w=3600, \"per-key\";q="),
        "{policies}"
    );
    let states = header(&refused, "ratelimit");
    assert!(
        states.starts_with("\"triage-bytes-per-customer\";r=1048;t="),
        "{states}"
    );
    let reason = assert_error(refused, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    assert!(reason.contains("triage-bytes-per-customer"), "{reason}");
    // The refused write cost nothing: a write of one finding (1,024) still fits.
    let one = app
        .client
        .patch(app.url("/api/v1/findings/f1"))
        .bearer_auth(&key)
        .json(&json!({"triage": {"state": "dismissed", "reason": "duplicate"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(one.status(), StatusCode::OK);
    assert_eq!(
        header(&one, "x-ratelimit-limit"),
        "1000",
        "the key's bucket again"
    );
}

#[tokio::test]
async fn scim_writes_past_the_customers_budget_are_refused_in_scims_shape() {
    let app = TestApp::with_budgets(|budgets| Budgets {
        scim_writes: limited(RatePolicy {
            limit: 2,
            window_secs: 60,
        }),
        ..budgets
    })
    .await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ProvisionScim]).await;
    let scim = Scim { app, customer, key };
    scim.create_user("ada@example.com").await;
    scim.create_user("grace@example.com").await;
    let refused = scim
        .send(
            Method::POST,
            "/Users",
            Some(json!({
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
                "userName": "edsger@example.com",
            })),
        )
        .await;
    assert!(header(&refused, "retry-after").parse::<u64>().unwrap() >= 1);
    assert!(
        header(&refused, "ratelimit-policy").starts_with("\"scim-writes-per-customer\";q=2;w=60"),
        "{}",
        header(&refused, "ratelimit-policy")
    );
    let body = assert_scim_error(refused, StatusCode::TOO_MANY_REQUESTS, None).await;
    assert!(
        body["detail"].as_str().unwrap().contains("600 a minute"),
        "{body}"
    );
    // Reads and searches are no writes.
    scim.call(Method::GET, "/Users", None, StatusCode::OK).await;
    scim.call(
        Method::POST,
        "/Users/.search",
        Some(json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"]})),
        StatusCode::OK,
    )
    .await;
}
