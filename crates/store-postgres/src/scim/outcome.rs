//! What a SCIM write's transaction decides: a version that holds or not, a limit, and how
//! its outcome becomes the port's answer.

use chrono::{DateTime, Utc};
use diesel::result::Error as DieselError;
use posture_domain::{Error, Result, scim::Meta};

use crate::error::{db_error, is_foreign_key_violation, is_unique_violation};

pub(super) fn meta(created: DateTime<Utc>, modified: DateTime<Utc>, version: i64) -> Meta {
    Meta {
        created,
        modified,
        version: u64::try_from(version).unwrap_or_default(),
    }
}

/// What a refused write says: a limit reached.
pub(crate) fn limit_reached(what: &'static str, max: u64) -> Error {
    Error::invalid(
        what,
        format!("a customer has at most {max} provisioned {what}"),
    )
}

/// The version a write must find: `Ok(())` when `expected` is none or names `found`.
pub(crate) fn check_version(found: i64, expected: Option<&[u64]>) -> Result<()> {
    match expected {
        Some(expected) if !u64::try_from(found).is_ok_and(|v| expected.contains(&v)) => Err(
            Error::PreconditionFailed("the resource changed since that version".to_owned()),
        ),
        _ => Ok(()),
    }
}

/// Why a write's transaction stopped (and rolled back): the database, or a refusal decided
/// inside it (a version that does not hold, a limit, a member that is not a user).
pub(crate) enum Tx {
    Db(DieselError),
    Refused(Error),
}

impl From<DieselError> for Tx {
    fn from(e: DieselError) -> Self {
        Tx::Db(e)
    }
}

/// A write's outcome; a unique violation (of the resource's name) is `taken`.
pub(crate) fn settle<T>(
    outcome: std::result::Result<T, Tx>,
    taken: impl FnOnce() -> Error,
) -> Result<T> {
    match outcome {
        Ok(value) => Ok(value),
        Err(Tx::Refused(e)) => Err(e),
        Err(Tx::Db(e)) if is_unique_violation(&e) => Err(taken()),
        // A member deleted between its check and its row (a race of two requests).
        Err(Tx::Db(e)) if is_foreign_key_violation(&e) => Err(Error::invalid(
            "members",
            "a member is not a user provisioned for this customer",
        )),
        Err(Tx::Db(e)) => Err(db_error(e)),
    }
}
