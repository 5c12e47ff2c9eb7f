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

/// Adds `Strict-Transport-Security` to every response when serving TLS.
pub(crate) async fn hsts(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>, actix_web::Error> {
    let enabled = req
        .app_data::<web::Data<ApiState>>()
        .is_some_and(|s| s.hsts);
    let mut response = next.call(req).await?;
    if enabled {
        response.headers_mut().insert(
            actix_web::http::header::STRICT_TRANSPORT_SECURITY,
            actix_web::http::header::HeaderValue::from_static("max-age=31536000"),
        );
    }
    Ok(response)
}
