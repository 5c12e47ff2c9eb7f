//! `/metrics`: the Prometheus series of the API.

use posture_domain::Scope;
use reqwest::StatusCode;

use crate::support::TestApp;

#[tokio::test]
async fn metrics_expose_requests_latencies_rejections_and_the_pool() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    for _ in 0..3 {
        assert_eq!(
            app.get("/api/v1/identities", &key).await.status(),
            StatusCode::OK
        );
    }
    assert_eq!(
        app.get("/api/v1/findings", &key).await.status(),
        StatusCode::FORBIDDEN
    );
    let response = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = response.text().await.unwrap();
    for series in [
        "posture_http_requests_total{method=\"GET\",route=\"/api/v1/identities\",status=\"200\"}",
        "posture_http_requests_total{method=\"GET\",route=\"/api/v1/findings\",status=\"403\"}",
        "posture_http_request_duration_seconds_bucket{method=\"GET\",route=\"/api/v1/identities\",status=\"200\",le=\"0.1\"}",
        "posture_db_pool_connections{state=\"max\"}",
        "posture_db_pool_connections{state=\"idle\"}",
        "posture_db_pool_waiting",
        "posture_rate_limiter_degraded 0",
    ] {
        assert!(text.contains(series), "{series} missing from:\n{text}");
    }
    let requests: f64 = text
        .lines()
        .find(|l| l.starts_with("posture_http_requests_total{method=\"GET\",route=\"/api/v1/identities\",status=\"200\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(requests >= 3.0);
}

#[tokio::test]
async fn rate_limit_rejections_are_counted() {
    use std::sync::Arc;

    use posture_domain::rate_limit::{InProcessRateLimiter, RateLimiter, RatePolicy};
    let limiter = || -> Arc<dyn RateLimiter> {
        Arc::new(InProcessRateLimiter::new(RatePolicy {
            limit: 1,
            window_secs: 900,
        }))
    };
    let app = TestApp::with_limiter(limiter, posture_http::TrustedProxies::default()).await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    app.get("/api/v1/tenants", &key).await;
    assert_eq!(
        app.get("/api/v1/tenants", &key).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    let text = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("posture_rate_limit_rejections_total{policy=\"per-key\"}"),
        "{text}"
    );
}
