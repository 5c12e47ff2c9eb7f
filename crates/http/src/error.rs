//! The error policy of the HTTP API, in one place.
//!
//! * Every error response, 4xx and 5xx, has the body `{error, reason?}`
//!   ([`ErrorResponse`]); `error` is a stable code, `reason` a sentence for humans that
//!   names the parameter, field or scope concerned. A 400 or 422 also says, for programs,
//!   which value it refused (`field`) and how (`kind`, a [`Refusal`]): nothing needs to
//!   read `reason`.
//! * Domain errors map to statuses here and nowhere else: `NotFound` → 404,
//!   `Invalid` → 400, `Conflict` → 409, `Unavailable` → 503, `Internal` → 500.
//! * 5xx bodies reveal nothing; the cause is logged once, inside the request's span (which
//!   carries the request id). An outage fails every request alike, so 503 causes are
//!   logged at most once a second, with the number left out since the last line.
//! * A foreign row is never confirmed: it is 404 exactly like a row that does not exist.
//! * 401 carries `WWW-Authenticate: Bearer`; 403 carries
//!   `WWW-Authenticate: Bearer error="insufficient_scope", scope="..."` (RFC 6750).

use std::{
    borrow::Cow,
    fmt,
    sync::{
        OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use actix_web::{
    HttpResponse, ResponseError,
    http::{StatusCode, header},
};
use posture_domain::{
    Error, Refusal, Scope,
    rate_limit::{RateBucket, RateDecision},
};
use posture_wire::{ErrorCode, ErrorResponse};

/// An error answered to an API caller.
#[derive(Clone, Debug)]
pub enum ApiError {
    /// 400 with the reason naming the parameter.
    InvalidRequest(Refused),
    /// 401.
    Unauthorized,
    /// 401 for a key that was valid once: the reason says why it is no longer.
    UnauthorizedBecause(String),
    /// 403 naming the missing scope.
    InsufficientScope(Scope),
    /// 403: the credential's allow-list does not name the request's address.
    Forbidden,
    /// 404; the reason (if any) never distinguishes foreign from missing.
    NotFound(Option<&'static str>),
    /// 405 with the methods the path allows.
    MethodNotAllowed { allow: String },
    /// 409.
    Conflict(String),
    /// 412: `If-Match` does not hold.
    PreconditionFailed(String),
    /// 413.
    PayloadTooLarge(String),
    /// 415.
    UnsupportedMediaType(String),
    /// 422 with the reason naming the field.
    Unprocessable(Refused),
    /// 429; `retry_after` in seconds.
    RateLimited { retry_after: u64 },
    /// 429 for a place the request would hold (a wait, an export), not the key's request
    /// quota.
    OperationLimited {
        what: &'static str,
        retry_after: u64,
    },
    /// 429 for a budget of the customer's (or of a subscription's) over a window: its
    /// rate-limit headers describe the budget that refused ([`RefusedBy`]).
    OverBudget {
        what: &'static str,
        refused: Box<RefusedBy>,
    },
    /// 503.
    Unavailable,
    /// 503: a resource of this instance (an export slot) stayed busy; the reason says which.
    Busy(&'static str),
    /// 500.
    Internal,
}

/// The budget that refused a request, and its state: the response's rate-limit headers
/// name it (kept in the response's extensions for the layer that writes them).
#[derive(Clone, Debug)]
pub struct RefusedBy {
    pub bucket: RateBucket,
    pub decision: RateDecision,
}

impl ApiError {
    /// 429 by `bucket`'s budget (`what` says which, for people) when `decision` refuses.
    pub(crate) fn over_budget(
        what: &'static str,
        bucket: RateBucket,
        decision: RateDecision,
    ) -> Result<(), ApiError> {
        if decision.allowed {
            return Ok(());
        }
        metrics::counter!("posture_rate_limit_rejections_total", "policy" => bucket.policy_name())
            .increment(1);
        Err(ApiError::OverBudget {
            what,
            refused: Box::new(RefusedBy { bucket, decision }),
        })
    }
}

/// A refused value: the sentence for people, and what and how for programs.
#[derive(Clone, Debug)]
pub struct Refused {
    pub reason: String,
    /// The parameter, header or body field; `None` when the request as a whole is refused.
    pub field: Option<Cow<'static, str>>,
    pub kind: Refusal,
}

impl Refused {
    /// `field` refused as `kind`; `reason` names it for people.
    pub fn field(
        kind: Refusal,
        field: impl Into<Cow<'static, str>>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            reason: reason.into(),
            field: Some(field.into()),
            kind,
        }
    }

    /// The request as a whole refused as `kind` (a body that is not JSON).
    pub fn whole(kind: Refusal, reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            field: None,
            kind,
        }
    }
}

impl ApiError {
    /// 400: the parameter or header `field` refused as `kind`.
    pub fn invalid(
        kind: Refusal,
        field: impl Into<Cow<'static, str>>,
        reason: impl Into<String>,
    ) -> Self {
        ApiError::InvalidRequest(Refused::field(kind, field, reason))
    }

    /// 422: the body field `field` refused as `kind`.
    pub fn unprocessable(
        kind: Refusal,
        field: impl Into<Cow<'static, str>>,
        reason: impl Into<String>,
    ) -> Self {
        ApiError::Unprocessable(Refused::field(kind, field, reason))
    }

    fn code(&self) -> ErrorCode {
        match self {
            ApiError::InvalidRequest(_) => ErrorCode::InvalidRequest,
            ApiError::Unauthorized | ApiError::UnauthorizedBecause(_) => ErrorCode::Unauthorized,
            ApiError::InsufficientScope(_) => ErrorCode::InsufficientScope,
            ApiError::Forbidden => ErrorCode::Forbidden,
            ApiError::NotFound(_) => ErrorCode::NotFound,
            ApiError::MethodNotAllowed { .. } => ErrorCode::MethodNotAllowed,
            ApiError::Conflict(_) => ErrorCode::Conflict,
            ApiError::PreconditionFailed(_) => ErrorCode::PreconditionFailed,
            ApiError::PayloadTooLarge(_) => ErrorCode::PayloadTooLarge,
            ApiError::UnsupportedMediaType(_) => ErrorCode::UnsupportedMediaType,
            ApiError::Unprocessable(_) => ErrorCode::UnprocessableEntity,
            ApiError::RateLimited { .. }
            | ApiError::OperationLimited { .. }
            | ApiError::OverBudget { .. } => ErrorCode::RateLimited,
            ApiError::Unavailable | ApiError::Busy(_) => ErrorCode::Unavailable,
            ApiError::Internal => ErrorCode::Internal,
        }
    }

    fn reason(&self) -> Option<String> {
        match self {
            ApiError::InvalidRequest(refused) | ApiError::Unprocessable(refused) => {
                Some(refused.reason.clone())
            }
            ApiError::Conflict(r)
            | ApiError::PreconditionFailed(r)
            | ApiError::PayloadTooLarge(r)
            | ApiError::UnsupportedMediaType(r) => Some(r.clone()),
            ApiError::Unauthorized => {
                Some("a valid API key is required: Authorization: Bearer svc_...".to_owned())
            }
            ApiError::UnauthorizedBecause(reason) => Some(reason.clone()),
            ApiError::InsufficientScope(scope) => Some(format!("requires scope {scope}")),
            ApiError::Forbidden => Some(
                "this credential may not be used from this address: an admin of its \
                 customer sets where it may be used from"
                    .to_owned(),
            ),
            ApiError::NotFound(reason) => reason.map(str::to_owned),
            ApiError::MethodNotAllowed { allow } => Some(format!("allowed methods: {allow}")),
            ApiError::RateLimited { retry_after } => {
                Some(format!("request quota exhausted; retry in {retry_after} s"))
            }
            ApiError::OperationLimited { what, retry_after } => {
                Some(format!("{what}; retry in {retry_after} s"))
            }
            ApiError::OverBudget { what, refused } => Some(format!(
                "{what} (policy {}); retry in {} s",
                refused.bucket.policy_name(),
                refused.decision.retry_after
            )),
            ApiError::Unavailable => Some("a backing service is unavailable; retry".to_owned()),
            ApiError::Busy(reason) => Some((*reason).to_owned()),
            ApiError::Internal => None,
        }
    }

    /// The JSON body of this error.
    pub fn body(&self) -> ErrorResponse {
        let refused = match self {
            ApiError::InvalidRequest(refused) | ApiError::Unprocessable(refused) => Some(refused),
            _ => None,
        };
        ErrorResponse {
            error: self.code(),
            reason: self.reason(),
            field: refused.and_then(|r| r.field.as_deref().map(str::to_owned)),
            kind: refused.map(|r| r.kind),
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason() {
            Some(reason) => write!(f, "{:?}: {reason}", self.code()),
            None => write!(f, "{:?}", self.code()),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized | ApiError::UnauthorizedBecause(_) => StatusCode::UNAUTHORIZED,
            ApiError::InsufficientScope(_) | ApiError::Forbidden => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PreconditionFailed(_) => StatusCode::PRECONDITION_FAILED,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::RateLimited { .. }
            | ApiError::OperationLimited { .. }
            | ApiError::OverBudget { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable | ApiError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status_code());
        match self {
            ApiError::Unauthorized | ApiError::UnauthorizedBecause(_) => {
                response.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
            }
            ApiError::InsufficientScope(scope) => {
                response.insert_header((
                    header::WWW_AUTHENTICATE,
                    format!("Bearer error=\"insufficient_scope\", scope=\"{scope}\""),
                ));
            }
            ApiError::MethodNotAllowed { allow } => {
                response.insert_header((header::ALLOW, allow.as_str()));
            }
            ApiError::RateLimited { retry_after }
            | ApiError::OperationLimited { retry_after, .. } => {
                response.insert_header((header::RETRY_AFTER, retry_after.to_string()));
            }
            ApiError::OverBudget { refused, .. } => {
                response.insert_header((
                    header::RETRY_AFTER,
                    refused.decision.retry_after.to_string(),
                ));
                response.extensions_mut().insert((**refused).clone());
            }
            ApiError::Unavailable | ApiError::Busy(_) => {
                response.insert_header((header::RETRY_AFTER, "5"));
            }
            _ => {}
        }
        response.json(self.body())
    }
}

/// A rule of the domain broken by a body: 422 naming the field (any other error as usual).
pub(crate) fn unprocessable(e: Error) -> ApiError {
    match e {
        Error::Invalid {
            field,
            reason,
            kind,
        } => {
            let reason = format!("{field} {reason}");
            ApiError::Unprocessable(Refused::field(kind, field, reason))
        }
        other => other.into(),
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match e {
            Error::NotFound => ApiError::NotFound(None),
            Error::Invalid {
                field,
                reason,
                kind,
            } => {
                let reason = format!("{field}: {reason}");
                ApiError::InvalidRequest(Refused::field(kind, field, reason))
            }
            Error::Conflict(reason) => ApiError::Conflict(reason),
            Error::PreconditionFailed(reason) => ApiError::PreconditionFailed(reason),
            Error::Unavailable(cause) => {
                if let Some(suppressed) = UNAVAILABLE_LOG.should_log(millis_since_start()) {
                    tracing::warn!(error = %cause, suppressed, "backing service unavailable");
                }
                ApiError::Unavailable
            }
            // A wait, not an outage: the caller is told what waits, and it is no warning.
            Error::Busy(reason) => {
                tracing::info!(reason, "the request waited past its bound");
                ApiError::Busy(reason)
            }
            Error::CredentialLapsed(reason) => ApiError::UnauthorizedBecause(reason),
            Error::Internal(cause) => {
                tracing::error!(error = %cause, "internal error");
                ApiError::Internal
            }
        }
    }
}

/// One log line per second for a storm of like events.
struct LogThrottle {
    /// When the last line was admitted, in milliseconds since start (+ 1 s, so the first
    /// event is admitted).
    last: AtomicU64,
    /// Events left out since then.
    suppressed: AtomicU64,
}

static UNAVAILABLE_LOG: LogThrottle = LogThrottle::new();

fn millis_since_start() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let elapsed = START.get_or_init(Instant::now).elapsed().as_millis();
    u64::try_from(elapsed)
        .unwrap_or(u64::MAX)
        .saturating_add(1000)
}

impl LogThrottle {
    const fn new() -> Self {
        Self {
            last: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// `Some(events left out since the last line)` when this event is to be logged.
    fn should_log(&self, now_ms: u64) -> Option<u64> {
        let last = self.last.load(Ordering::Relaxed);
        if now_ms.saturating_sub(last) >= 1000
            && self
                .last
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.suppressed.swap(0, Ordering::Relaxed));
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// The answer of a path no route has: the API's 404, for every scope's unmatched paths.
pub(crate) async fn not_found() -> Result<actix_web::HttpResponse, ApiError> {
    Err(ApiError::NotFound(Some("no such route")))
}

#[cfg(test)]
mod tests {
    use super::LogThrottle;

    #[test]
    fn a_storm_of_like_events_is_logged_once_a_second_with_the_count_left_out() {
        let throttle = LogThrottle::new();
        assert_eq!(throttle.should_log(1_000), Some(0));
        for ms in 1_001..1_999 {
            assert_eq!(throttle.should_log(ms), None);
        }
        assert_eq!(throttle.should_log(2_000), Some(998));
        assert_eq!(throttle.should_log(2_500), None);
        assert_eq!(throttle.should_log(9_000), Some(1));
    }
}
