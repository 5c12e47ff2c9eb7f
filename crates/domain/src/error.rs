//! Domain errors: what went wrong, said in domain terms.
//!
//! Adapters convert their own errors (database, Redis) into [`Error`] at the port boundary;
//! `posture-http` maps each variant to an HTTP status in exactly one place.

use std::borrow::Cow;

/// Any error an adapter wants to carry as the cause of `Unavailable` or `Internal`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Shorthand for results of domain operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The row does not exist for this customer (foreign rows are never confirmed).
    #[error("not found")]
    NotFound,
    /// A value given by the caller breaks a rule; `field` names it, `kind` says how.
    #[error("invalid {field}: {reason}")]
    Invalid {
        field: Cow<'static, str>,
        reason: String,
        kind: Refusal,
    },
    /// The request is valid but conflicts with the current state (e.g. a quota is reached).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The caller's precondition (`If-Match`) does not hold: the row changed since it read it.
    #[error("precondition failed: {0}")]
    PreconditionFailed(String),
    /// A backing service (database, Redis) cannot be reached right now; retrying may work.
    #[error("service unavailable")]
    Unavailable(#[source] BoxError),
    /// What the request needs is held by other work past the request's wait (an analyzer
    /// pass holding the customer's lock): nothing is down, and retrying shortly works. The
    /// reason says what waits, for the caller.
    #[error("busy: {0}")]
    Busy(&'static str),
    /// A credential that was valid no longer authenticates for a reason its holder should
    /// read (unused longer than its customer allows): the reason says it.
    #[error("credential lapsed: {0}")]
    CredentialLapsed(String),
    /// Anything else; the cause is logged, never shown to the caller.
    #[error("internal error")]
    Internal(#[source] BoxError),
}

impl Error {
    /// A value that breaks a rule the reason states ([`Refusal::Invalid`]).
    pub fn invalid(field: impl Into<Cow<'static, str>>, reason: impl Into<String>) -> Self {
        Self::refused(Refusal::Invalid, field, reason)
    }

    /// A value refused in a way a program can act on without reading `reason`.
    pub fn refused(
        kind: Refusal,
        field: impl Into<Cow<'static, str>>,
        reason: impl Into<String>,
    ) -> Self {
        Error::Invalid {
            field: field.into(),
            reason: reason.into(),
            kind,
        }
    }

    pub fn internal(cause: impl Into<BoxError>) -> Self {
        Error::Internal(cause.into())
    }
}

/// How a caller's value was refused, for programs (the HTTP API answers it as `kind` beside
/// `field`). The set may grow; [`Refusal::Invalid`] is what any kind means at least.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// Breaks a rule the reason states.
    Invalid,
    /// Cannot be read as its type or format (not JSON, not a number, not a UUID).
    Malformed,
    /// A number, length or count outside its bounds.
    OutOfRange,
    /// A parameter or field the operation does not take.
    Unknown,
    /// A required parameter or field is absent.
    Missing,
    /// Given more than once where one value is taken.
    Repeated,
    /// An `after` cursor that does not belong to this request (made for other parameters, or
    /// before the server's secret was rotated): start again from the first page.
    CursorMismatch,
}

impl Refusal {
    pub const ALL: [Refusal; 7] = [
        Refusal::Invalid,
        Refusal::Malformed,
        Refusal::OutOfRange,
        Refusal::Unknown,
        Refusal::Missing,
        Refusal::Repeated,
        Refusal::CursorMismatch,
    ];

    /// The kind on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Invalid => "invalid",
            Refusal::Malformed => "malformed",
            Refusal::OutOfRange => "out_of_range",
            Refusal::Unknown => "unknown",
            Refusal::Missing => "missing",
            Refusal::Repeated => "repeated",
            Refusal::CursorMismatch => "cursor_mismatch",
        }
    }

    /// What it means, for the contract and the docs.
    pub fn meaning(self) -> &'static str {
        match self {
            Refusal::Invalid => "breaks a rule the reason states (what any kind means at least)",
            Refusal::Malformed => "cannot be read as its type or format",
            Refusal::OutOfRange => "a number, length or count outside its bounds",
            Refusal::Unknown => "a parameter or field the operation does not take",
            Refusal::Missing => "a required parameter or field is absent",
            Refusal::Repeated => "given more than once where one value is taken",
            Refusal::CursorMismatch => {
                "an `after` cursor that does not belong to this request (other parameters, or \
                 issued before the server's secret was rotated): start again without it"
            }
        }
    }
}
