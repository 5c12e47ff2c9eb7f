//! The gate of `/api/v1`: authentication, then the rate limit, then the route.
//!
//! 1. A route that needs a key authenticates the request (`auth.rs`).
//! 2. The request is counted: against its key's bucket when the key is valid, otherwise
//!    against the client address's bucket (so guessing keys is throttled like any other
//!    unauthenticated traffic). Every request counts, refused ones included.
//! 3. Over the limit: 429 with `Retry-After`. Otherwise a failed authentication is answered
//!    (401), or the route runs (which checks its scope).
//!
//! Every response of `/api/v1` carries the headers of the bucket it counted against:
//! `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch seconds of the
//! window's end), and the IETF draft fields `RateLimit-Policy` and `RateLimit`.

use actix_web::{
    Error, HttpMessage,
    body::{EitherBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::header::{HeaderMap, HeaderName, HeaderValue},
    middleware::Next,
    web,
};
use posture_domain::rate_limit::{RateBucket, RateDecision};

use crate::{auth::authenticate, client_ip::bucket_name, error::ApiError, routes, state::ApiState};

const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// The bucket of a request without a valid key: its client address.
fn address_bucket(req: &ServiceRequest, state: &ApiState) -> RateBucket {
    let forwarded: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok())
        .collect();
    let name = match req.peer_addr() {
        Some(peer) => bucket_name(state.trusted_proxies.client(peer.ip(), &forwarded)),
        None => "unknown".to_owned(),
    };
    RateBucket::Address(name)
}

fn set_headers(headers: &mut HeaderMap, bucket: &RateBucket, d: &RateDecision) {
    let numbers = [
        (X_LIMIT, u64::from(d.limit)),
        (X_REMAINING, u64::from(d.remaining)),
        (X_RESET, d.reset_at),
    ];
    for (name, value) in numbers {
        headers.insert(name, HeaderValue::from(value));
    }
    let policy = bucket.policy_name();
    if let Ok(value) =
        HeaderValue::from_str(&format!("\"{policy}\";q={};w={}", d.limit, d.window_secs))
    {
        headers.insert(POLICY, value);
    }
    if let Ok(value) = HeaderValue::from_str(&format!(
        "\"{policy}\";r={};t={}",
        d.remaining, d.retry_after
    )) {
        headers.insert(RATELIMIT, value);
    }
}

pub(crate) async fn gate(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let Some(state) = req.app_data::<web::Data<ApiState>>().cloned() else {
        return Ok(req.error_response(ApiError::Internal).map_into_right_body());
    };
    let (bucket, refusal) = if routes::is_public(req.path()) {
        (address_bucket(&req, &state), None)
    } else {
        match authenticate(&state, req.headers()).await {
            Ok(principal) => {
                let bucket = RateBucket::Key(principal.key_id());
                req.extensions_mut().insert(principal);
                (bucket, None)
            }
            Err(e) => (address_bucket(&req, &state), Some(e)),
        }
    };
    let decision = match state.ports.limiter.check(&bucket).await {
        Ok(decision) => Some(decision),
        Err(e) => {
            // The limiters answer even without Redis; this is a bug, not a reason to refuse.
            tracing::error!(error = %e, "rate limiter failed; request not counted");
            None
        }
    };
    let mut response = match (decision, refusal) {
        (Some(d), _) if !d.allowed => {
            metrics::counter!("posture_rate_limit_rejections_total", "policy" => bucket.policy_name())
                .increment(1);
            req.error_response(ApiError::RateLimited {
                retry_after: d.retry_after,
            })
            .map_into_right_body()
        }
        (_, Some(refusal)) => req.error_response(refusal).map_into_right_body(),
        (_, None) => next.call(req).await?.map_into_left_body(),
    };
    if let Some(decision) = &decision {
        set_headers(response.headers_mut(), &bucket, decision);
    }
    Ok(response)
}
