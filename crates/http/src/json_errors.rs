//! A safety net, applied by the one middleware (`pipeline.rs`): any 4xx or 5xx response
//! that is not already JSON (an error produced by
//! actix itself, e.g. a malformed request line or an oversized payload) gets the
//! `{error, reason?}` body, so callers never see a plain-text error. HTML pages (the
//! console's errors in words) and SCIM's errors (`application/scim+json`, RFC 7644's shape)
//! are left as they are.

use actix_web::{
    HttpResponse,
    body::{EitherBody, MessageBody},
    dev::ServiceResponse,
    http::{StatusCode, header},
};
use posture_domain::Refusal;
use posture_wire::{ErrorCode, ErrorResponse};

fn code_for(status: StatusCode) -> ErrorCode {
    match status {
        StatusCode::UNAUTHORIZED => ErrorCode::Unauthorized,
        StatusCode::FORBIDDEN => ErrorCode::InsufficientScope,
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
        StatusCode::CONFLICT => ErrorCode::Conflict,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
        StatusCode::UNPROCESSABLE_ENTITY => ErrorCode::UnprocessableEntity,
        StatusCode::TOO_MANY_REQUESTS => ErrorCode::RateLimited,
        StatusCode::SERVICE_UNAVAILABLE => ErrorCode::Unavailable,
        s if s.is_client_error() => ErrorCode::InvalidRequest,
        _ => ErrorCode::Internal,
    }
}

fn is_json_or_page(res: &ServiceResponse<impl MessageBody>) -> bool {
    res.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.starts_with("application/json")
                || v.starts_with("application/scim+json")
                || v.starts_with("text/html")
        })
}

/// `res` with the `{error, reason}` body if it is an error without a JSON body (or a page).
pub(crate) fn ensure_json<B: MessageBody + 'static>(
    res: ServiceResponse<B>,
) -> ServiceResponse<EitherBody<B>> {
    let status = res.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json_or_page(&res) {
        return res.map_into_left_body();
    }
    let reason = status.canonical_reason().map(|r| r.to_lowercase());
    let (req, old) = res.into_parts();
    let mut new = HttpResponse::build(status);
    for (name, value) in old.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            new.append_header((name.clone(), value.clone()));
        }
    }
    // A 400 here is the framework's own (a request it could not read): `malformed`.
    let kind = matches!(status.as_u16(), 400 | 422).then_some(Refusal::Malformed);
    let body = new.json(ErrorResponse {
        error: code_for(status),
        reason,
        field: None,
        kind,
    });
    ServiceResponse::new(req, body).map_into_right_body()
}
