//! The error policy: JSON bodies everywhere, 404 and 405, no-store.

use posture_domain::{Refusal, Scope};
use reqwest::StatusCode;

use crate::support::{TestApp, assert_error, assert_refused};

#[tokio::test]
async fn an_unknown_route_is_404_with_a_json_body() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    // At the root, and inside each scope of the router: a collection's (`/findings`,
    // `/webhooks`) and the reference page's.
    for path in [
        "/api/v1/nothing-here",
        "/api/v1/findings/f-1/more",
        "/api/v1/webhooks/w/deliveries/d/x/y",
        "/api/v1/docs/a/b",
    ] {
        let reason = assert_error(
            app.get(path, &key).await,
            StatusCode::NOT_FOUND,
            "not_found",
        )
        .await;
        assert_eq!(reason, "no such route", "{path}");
    }
    let outside = app.client.get(app.url("/elsewhere")).send().await.unwrap();
    assert_error(outside, StatusCode::NOT_FOUND, "not_found").await;
}

#[tokio::test]
async fn an_unsupported_method_is_405_with_allow() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let response = app
        .client
        .delete(app.url("/api/v1/identities"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["allow"], "GET, HEAD");
    assert_error(
        response,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    )
    .await;
}

#[tokio::test]
async fn every_api_response_is_not_cacheable() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    for (path, key) in [
        ("/api/v1/identities", key.as_str()),
        ("/api/v1/identities", "bad"),
        ("/api/v1/nope", key.as_str()),
    ] {
        let response = app.get(path, key).await;
        assert_eq!(
            response.headers()["cache-control"],
            "no-store",
            "{path} ({})",
            response.status()
        );
    }
}

#[tokio::test]
async fn an_unknown_query_parameter_is_400_naming_it() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let reason = assert_refused(
        app.get("/api/v1/identities?colour=red", &key).await,
        StatusCode::BAD_REQUEST,
        "colour",
        Refusal::Unknown,
    )
    .await;
    assert!(
        reason.contains("colour") && reason.contains("limit"),
        "{reason}"
    );
}

#[tokio::test]
async fn responses_carry_a_request_id_and_keep_a_safe_incoming_one() {
    let app = TestApp::start().await;
    let response = app
        .client
        .get(app.url("/healthz"))
        .header("X-Request-Id", "trace-123")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "trace-123");
    let response = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(response.headers()["x-request-id"].len(), 32);
}

#[tokio::test]
async fn every_response_tells_browsers_not_to_sniff_its_type() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadFindings]).await;
    let anonymous = |path: &str| app.client.get(app.url(path)).send();
    let mut responses = vec![
        anonymous("/healthz").await.unwrap(),
        anonymous("/readyz").await.unwrap(),
        anonymous("/metrics").await.unwrap(),
        anonymous("/api/v1/openapi.json").await.unwrap(),
        anonymous("/api/v1/findings").await.unwrap(),
        anonymous("/nothing-here").await.unwrap(),
        app.get("/api/v1/findings", &key).await,
        app.get("/api/v1/findings/export?format=cef", &key).await,
        app.get("/api/v1/identities", &key).await,
        app.get("/api/v1/findings?limit=x", &key).await,
    ];
    responses.push(
        app.client
            .delete(app.url("/api/v1/findings"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap(),
    );
    let statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
    for r in &responses {
        assert_eq!(
            r.headers()
                .get("x-content-type-options")
                .map(|v| v.to_str().unwrap()),
            Some("nosniff"),
            "{} {}",
            r.url(),
            r.status()
        );
    }
    for expected in [200, 401, 403, 404, 400, 405] {
        assert!(statuses.contains(&expected), "{statuses:?}");
    }
}
