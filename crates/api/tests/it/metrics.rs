//! `/metrics`: the Prometheus series of the API.

use posture_domain::Scope;
use reqwest::StatusCode;

use crate::support::TestApp;

/// The text of `/metrics`.
async fn metrics(app: &TestApp) -> String {
    let response = app.client.get(app.url("/metrics")).send().await.unwrap();
    response.text().await.unwrap()
}

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
        "posture_export_slots{state=\"max\"}",
        "posture_key_cache_live",
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

    use posture_domain::rate_limit::{RateLimiter, RatePolicy};
    let limiter = || -> Arc<dyn RateLimiter> {
        Arc::new(crate::harness::held_limiter(RatePolicy {
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
    let text = metrics(&app).await;
    assert!(
        text.contains("posture_rate_limit_rejections_total{policy=\"per-key\"}"),
        "{text}"
    );
}

/// The label values of `label` across the `posture_http_*` series.
fn label_values(text: &str, label: &str) -> std::collections::BTreeSet<String> {
    let prefix = format!("{label}=\"");
    text.lines()
        .filter(|l| l.starts_with("posture_http_"))
        .filter_map(|l| {
            let start = l.find(&prefix)? + prefix.len();
            let end = start + l[start..].find('"')?;
            Some(l[start..end].to_owned())
        })
        .collect()
}

#[tokio::test]
async fn made_up_methods_and_paths_add_no_series() {
    use posture_http::routes::ENDPOINTS;
    use reqwest::Method;

    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    for i in 0..1000u32 {
        let method = Method::from_bytes(format!("XQ{i}").as_bytes()).unwrap();
        let path = match i % 8 {
            0 => format!("/zz{i}"),
            1 => format!("/api/v1/zz{i}"),
            2 => format!("/api/v1/findings/zz{i}"),
            3 => format!("/console/zz{i}/keys/zz/zz"),
            4 => format!("/console/zz{i}"),
            5 => format!("/scim/v2/zz{i}"),
            6 => format!("/scim/v2/Users/zz{i}"),
            _ => "/api/v1/identities".to_owned(),
        };
        let status = app
            .client
            .request(method, app.url(&path))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .status();
        assert!(status.is_client_error(), "{path}: {status}");
    }
    let text = app.get_public_text("/metrics").await;
    assert!(!text.contains("XQ"), "a made-up method became a label");
    assert!(!text.contains("zz"), "a made-up path became a label");
    let methods = label_values(&text, "method");
    assert!(methods.contains("OTHER"), "{methods:?}");
    let known = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "OTHER",
    ];
    assert!(
        methods.iter().all(|m| known.contains(&m.as_str())),
        "{methods:?}"
    );
    let templates: Vec<String> = ENDPOINTS
        .iter()
        .map(|e| e.full_path())
        .chain(
            posture_console::routes()
                .into_iter()
                .map(|r| format!("{}{r}", posture_console::PREFIX)),
        )
        .chain(
            posture_http::scim::routes()
                .iter()
                .map(|r| format!("{}{r}", posture_http::scim::PREFIX)),
        )
        .chain(posture_http::oauth::routes().iter().map(|r| r.to_string()))
        .collect();
    let fixed = [
        "unmatched",
        "/healthz",
        "/readyz",
        "/metrics",
        "/api/v1/docs",
        "/api/v1/docs/",
        "/api/v1/docs/{file}",
    ];
    for route in label_values(&text, "route") {
        assert!(
            templates.contains(&route) || fixed.contains(&route.as_str()),
            "route label {route:?} is not a template of the table"
        );
    }
}

#[tokio::test]
async fn the_pool_gauges_count_the_connections_of_every_worker() {
    // The test server runs as `serve` does: 2 workers, each with 4 connections of its own,
    // beside the instance's pool of 8 (start-up checks, the console).
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    for _ in 0..4 {
        assert_eq!(
            app.get("/api/v1/identities", &key).await.status(),
            StatusCode::OK
        );
    }
    let text = metrics(&app).await;
    let gauge = |series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{series} missing from:\n{text}"))
    };
    assert_eq!(gauge("posture_db_pool_connections{state=\"max\"}"), 16.0);
    let open = gauge("posture_db_pool_connections{state=\"open\"}");
    assert!(
        open >= 1.0,
        "the requests' connections are counted as open: {open}"
    );
}
