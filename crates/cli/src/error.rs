//! The CLI's failures, said in words.

use reqwest::StatusCode;

/// A failure, said in words; `Display` is what the user reads.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(
        "the key was not accepted: revoked, expired or mistyped (check POSTURE_API_KEY, or \
         POSTURE_CLIENT_ID; `posture whoami` shows what the service knows of a key)"
    )]
    Unauthorized,
    #[error(
        "the OAuth client was not accepted: {reason} (check POSTURE_CLIENT_ID and its \
         POSTURE_CLIENT_SECRET or POSTURE_CLIENT_KEY_FILE; a revoked client gets no token)"
    )]
    ClientRefused { reason: String },
    #[error("the key may not do this: {reason} (ask your admin for a key with that scope)")]
    Forbidden { reason: String },
    #[error("posture refused the request: {reason}")]
    Refused {
        status: StatusCode,
        reason: String,
        /// The body's `kind` on a 400 or 422 (how a value was refused), if it says one.
        kind: Option<String>,
    },
    #[error(
        "posture is unavailable ({status}) after {attempts} attempts; run the command again later"
    )]
    Unavailable { status: StatusCode, attempts: u32 },
    #[error("posture failed ({status}{}); quote request id {request_id} when reporting it", reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    Server {
        status: StatusCode,
        reason: Option<String>,
        request_id: String,
    },
    #[error("could not reach {url} after {attempts} attempts: {cause}")]
    Network {
        url: String,
        attempts: u32,
        cause: String,
    },
    #[error("posture answered something this CLI does not understand: {0}")]
    Unexpected(String),
}

impl ApiError {
    /// A 400 about the `after` cursor (e.g. issued before the operator rotated the server's
    /// secret): the caller may start again without it.
    pub fn is_refused_cursor(&self) -> bool {
        matches!(self, ApiError::Refused { status, kind: Some(kind), .. }
            if *status == StatusCode::BAD_REQUEST && kind == "cursor_mismatch")
    }
}

/// A network failure in a few words (the innermost cause says the most).
pub fn describe(e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    if e.is_timeout() {
        "timed out".to_owned()
    } else {
        cause.to_string()
    }
}
