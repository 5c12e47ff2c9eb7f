//! The error body: `{error, reason?}` with the matching HTTP status.

use schemars::JsonSchema;
use serde::Serialize;

/// Machine-readable error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: a parameter or body field is malformed or out of range.
    InvalidRequest,
    /// 401: missing, malformed, unknown, revoked or expired key.
    Unauthorized,
    /// 403: the key lacks the route's scope.
    InsufficientScope,
    /// 404: no such route or resource for this customer.
    NotFound,
    /// 405: the path exists but not with this method.
    MethodNotAllowed,
    /// 409: the request conflicts with the current state.
    Conflict,
    /// 412: `If-Match` does not hold: the resource changed since its `ETag` was read.
    PreconditionFailed,
    /// 413: the body is too large.
    PayloadTooLarge,
    /// 415: the body is not JSON.
    UnsupportedMediaType,
    /// 422: the body is well-formed JSON but breaks a rule.
    UnprocessableEntity,
    /// 429: the key's (or address's) request quota for the window is used up.
    RateLimited,
    /// 500: an unexpected error; details are logged, never returned.
    Internal,
    /// 503: a backing service is unreachable; retry later.
    Unavailable,
}

/// Every 4xx and 5xx response has this body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ErrorResponse {
    pub error: ErrorCode,
    /// What was wrong, for a human; names the parameter, field or missing scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
