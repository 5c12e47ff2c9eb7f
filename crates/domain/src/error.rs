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
    /// A value given by the caller breaks a rule; `field` names it.
    #[error("invalid {field}: {reason}")]
    Invalid {
        field: Cow<'static, str>,
        reason: String,
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
    /// Anything else; the cause is logged, never shown to the caller.
    #[error("internal error")]
    Internal(#[source] BoxError),
}

impl Error {
    pub fn invalid(field: impl Into<Cow<'static, str>>, reason: impl Into<String>) -> Self {
        Error::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub fn internal(cause: impl Into<BoxError>) -> Self {
        Error::Internal(cause.into())
    }
}
