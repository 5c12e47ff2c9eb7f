//! Conversion of database and pool errors into domain errors, at the port boundary.

use diesel::result::{DatabaseErrorKind, Error as DieselError};
use posture_domain::Error;

/// Maps a Diesel error: a missing row is `NotFound`; a lost connection, or a statement
/// cancelled at the session's `statement_timeout`, `Unavailable` (the caller may retry);
/// anything else `Internal` (logged by the caller, never shown).
pub(crate) fn db_error(e: DieselError) -> Error {
    match e {
        DieselError::NotFound => Error::NotFound,
        DieselError::DatabaseError(
            DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand,
            _,
        ) => Error::Unavailable(Box::new(e)),
        // SQLSTATE 57014 (query_canceled); diesel-async keeps only the message.
        DieselError::DatabaseError(DatabaseErrorKind::Unknown, ref info)
            if info.message().contains("statement timeout") =>
        {
            Error::Unavailable(Box::new(e))
        }
        DieselError::BrokenTransactionManager => Error::Unavailable(Box::new(e)),
        other => Error::Internal(Box::new(other)),
    }
}

/// Whether the error is a foreign-key violation (of any constraint).
pub(crate) fn is_foreign_key_violation(e: &DieselError) -> bool {
    matches!(
        e,
        DieselError::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _)
    )
}

/// A value read from the database that the domain does not accept: the schema's CHECKs
/// should make this impossible, so it is an internal error.
pub(crate) fn corrupt(what: &str, e: impl std::fmt::Display) -> Error {
    Error::internal(format!("unexpected {what} in the database: {e}"))
}
