//! `/healthz` (the process is alive), `/metrics` and `/readyz` (it can serve: database reachable, schema
//! current; the rate limiter's state is reported, and a degraded limiter does not make the
//! instance unready since requests are still served). Neither needs a key nor is counted.
//! `/readyz` checks the database at most once per second whatever the number of
//! callers (it is public: a flood of probes must not become a flood of queries).

use actix_web::{HttpResponse, web};
use posture_domain::rate_limit::LimiterState;
use serde_json::json;

use crate::{readiness::DatabaseCheck, state::ApiState};

async fn check_database(state: &ApiState) -> DatabaseCheck {
    let reachable = state.ports.health.ping().await.is_ok();
    let schema = if reachable {
        match state.ports.health.schema_is_current().await {
            Ok(true) => "current",
            Ok(false) => "migrations pending",
            Err(_) => "unknown",
        }
    } else {
        "unknown"
    };
    DatabaseCheck { reachable, schema }
}

pub(crate) async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

pub(crate) async fn readyz(state: web::Data<ApiState>) -> HttpResponse {
    let DatabaseCheck { reachable, schema } = state
        .readiness
        .get_or_check(|| check_database(&state))
        .await;
    let limiter = match state.ports.limiter.state() {
        LimiterState::InProcess => json!({"mode": "in-process"}),
        LimiterState::Shared => json!({"mode": "shared"}),
        LimiterState::Degraded { since_epoch_secs } => {
            json!({"mode": "degraded", "detail": "Redis unreachable; counting per instance", "sinceEpochSecs": since_epoch_secs})
        }
    };
    let ready = reachable && schema == "current";
    let body = json!({
        "status": if ready { "ready" } else { "not_ready" },
        "checks": {
            "database": if reachable { "ok" } else { "unreachable" },
            "schema": schema,
            "rateLimiter": limiter,
        }
    });
    if ready {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

/// `GET /metrics`: Prometheus text format (404 when served on a separate address).
pub(crate) async fn metrics(state: web::Data<ApiState>) -> HttpResponse {
    match &state.metrics {
        Some(render) => HttpResponse::Ok()
            .content_type("text/plain; version=0.0.4; charset=utf-8")
            .body(render()),
        None => HttpResponse::NotFound().json(
            json!({"error": "not_found", "reason": "metrics are served on POSTURE_METRICS_BIND"}),
        ),
    }
}

/// The headers every response of the application carries (set by the one middleware,
/// `pipeline.rs`):
/// `X-Content-Type-Options: nosniff`, unless the response set its own, and, when serving
/// TLS (`hsts`), `Strict-Transport-Security`.
pub(crate) fn security_headers(headers: &mut actix_web::http::header::HeaderMap, hsts: bool) {
    use actix_web::http::header::{self, HeaderValue};
    if !headers.contains_key(header::X_CONTENT_TYPE_OPTIONS) {
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
    }
    if hsts {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
}
