//! Every console request but the static assets counts against its client address's budget
//! of the API's rate limiter (the budget of requests without a valid key): a page costs a
//! database query or two before its session is known, so a flood of made-up cookies is
//! refused (429, a page saying when to try again) before it costs more.

use actix_web::{
    Error, ResponseError,
    body::{BoxBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    middleware::Next,
    web,
};
use posture_domain::rate_limit::RateBucket;
use posture_http::client_ip::request_bucket_name;

use crate::{ConsoleError, ConsoleState, PREFIX};

pub async fn throttle(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let is_asset = req
        .path()
        .strip_prefix(PREFIX)
        .is_some_and(|rest| rest.starts_with("/assets/"));
    let state = req.app_data::<web::Data<ConsoleState>>().cloned();
    if let (false, Some(state)) = (is_asset, state) {
        let bucket =
            RateBucket::Address(request_bucket_name(req.request(), &state.trusted_proxies));
        let refusal = match state.ports.request_limiter.check(&bucket).await {
            Ok(decision) if decision.allowed => None,
            Ok(decision) => Some(ConsoleError::TooManyRequests {
                retry_after: decision.retry_after,
            }),
            Err(e) => Some(ConsoleError::from(e)),
        };
        if let Some(refusal) = refusal {
            return Ok(req.into_response(refusal.error_response()));
        }
    }
    next.call(req)
        .await
        .map(ServiceResponse::map_into_boxed_body)
}
