//! A safety net: any 4xx or 5xx response that is not already JSON (an error produced by
//! actix itself, e.g. a malformed request line or an oversized payload) gets the
//! `{error, reason?}` body, so callers never see a plain-text error. HTML pages (the
//! console's errors in words) and SCIM's errors (`application/scim+json`, RFC 7644's shape)
//! are left as they are.

use actix_web::{
    HttpResponse, Result,
    body::{EitherBody, MessageBody},
    dev::ServiceResponse,
    http::{StatusCode, header},
    middleware::ErrorHandlerResponse,
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

pub(crate) fn ensure_json<B: MessageBody + 'static>(
    res: ServiceResponse<B>,
) -> Result<ErrorHandlerResponse<B>> {
    if is_json_or_page(&res) {
        return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
    }
    let status = res.status();
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
    Ok(ErrorHandlerResponse::Response(
        ServiceResponse::new(req, body).map_body(|_, b| EitherBody::right(b)),
    ))
}
