//! Conversion of database and pool errors into domain errors, at the port boundary.

use diesel::result::{DatabaseErrorKind, Error as DieselError};
use posture_domain::Error;

fn unavailable(e: DieselError) -> Error {
    crate::pool_health::connection_failed();
    Error::Unavailable(Box::new(e))
}

/// Server messages of errors that say "the server or the connection is going away, try
/// again", not "this request is wrong": SQLSTATE class 08 (connection exception), 57P01–05
/// (admin, crash or idle-session shutdown, cannot connect now, database dropped), 25P03 (an
/// idle transaction ended) and 57014 at the statement timeout. diesel-async (0.9) keeps the
/// SQLSTATE of a handful of errors as a [`DatabaseErrorKind`] and drops it for every other
/// (its error type is private, and diesel's `DatabaseErrorInformation` has no code), so
/// these are matched on PostgreSQL's English messages, and every pooled connection asks for
/// English ([`ENGLISH_MESSAGES`]). A read replica cancels a query that conflicts with the
/// WAL it replays (40001, "conflict with recovery"), which arrives as
/// `SerializationFailure`: that query may be retried too. On Citus a worker node that does not
/// answer the coordinator is the same kind of fault, for the customers whose shards it
/// holds: the coordinator reports it in its own words (from "connection to the remote
/// node": a node it cannot reach or connect to; a worker connection lost within a
/// transaction or its two-phase commit, which the coordinator rolls back; a commit a worker
/// did not confirm, when the worker goes away within it, whose outcome is as unknown as a
/// commit cut from one server; and a coordinator whose postmaster died while its backend
/// waited on a worker, as when it fails over). A write that reaches a server that has just
/// become a standby (25006, "cannot execute ... in a read-only transaction": a switchover
/// in progress, or a Citus node's row in `pg_dist_node` not yet moved to its new primary)
/// changed nothing and may be retried too (a write sent to a read replica by mistake would
/// read the same, as 503 and a warning rather than a 500: posture sends none there).
const UNAVAILABLE_MESSAGES: &[&str] = &[
    "terminating connection",
    "the database system is",
    "canceling statement due to statement timeout",
    "could not connect",
    "connection to server",
    "server closed the connection",
    "no connection to the server",
    "in a read-only transaction",
    "connection to the remote node",
    "connection establishment for node",
    "could not establish any connections to the node",
    "failure on connection marked as essential",
    "failed to prepare transaction",
    "could not commit transaction for shard",
    "postmaster was shut down",
];

/// Run on every new pooled connection: PostgreSQL's messages in English, which
/// [`UNAVAILABLE_MESSAGES`] needs, whatever the server's `lc_messages`. `lc_messages` is
/// for superusers and for roles granted it (`GRANT SET ON PARAMETER lc_messages`,
/// PostgreSQL 15+); for any other role this does nothing, and the start-up check
/// ([`crate::PgStore::messages_not_in_english`]) warns if the server's language is
/// another.
pub(crate) const ENGLISH_MESSAGES: &str = "DO $$BEGIN SET lc_messages TO 'C'; \
     EXCEPTION WHEN insufficient_privilege THEN NULL; END$$;";

/// Whether an `lc_messages` value gives English messages: the C locale, an English one, or
/// the empty value (the server's environment, which initdb sets from its own locale).
pub(crate) fn is_english(lc_messages: &str) -> bool {
    let value = lc_messages.trim();
    value.is_empty()
        || value.eq_ignore_ascii_case("C")
        || value.eq_ignore_ascii_case("POSIX")
        || value.starts_with("C.")
        || value.starts_with("en_")
        || value.starts_with("en.")
        || value == "en"
}

/// Whether a database error says the connection or the server is going away.
fn is_connection_failure(info: &dyn diesel::result::DatabaseErrorInformation) -> bool {
    let message = info.message();
    UNAVAILABLE_MESSAGES.iter().any(|m| message.contains(m))
}

/// Maps a Diesel error: a missing row is `NotFound`; a lost connection, a server shutting
/// down or a statement cancelled at the session's `statement_timeout` `Unavailable` (the
/// caller may retry: 503 with `Retry-After`; the pool discards a closed connection); anything
/// else `Internal` (logged by the caller, never shown).
pub(crate) fn db_error(e: DieselError) -> Error {
    match e {
        DieselError::NotFound => Error::NotFound,
        // Only the triage writes and the expiry sweep wait with a `lock_timeout`: for the
        // customer's lock, which an analyzer pass holds while it commits.
        DieselError::DatabaseError(_, ref info)
            if info
                .message()
                .contains("canceling statement due to lock timeout") =>
        {
            Error::Busy(
                "other work (an analyzer pass) holds your organisation's findings: retry in a few seconds",
            )
        }
        DieselError::DatabaseError(
            DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand,
            _,
        ) => unavailable(e),
        DieselError::DatabaseError(DatabaseErrorKind::Unknown, ref info)
            if is_connection_failure(info.as_ref()) =>
        {
            unavailable(e)
        }
        // 40001 by its SQLSTATE: a standby's conflict with recovery (or a serialization
        // failure), which a retry may not meet.
        DieselError::DatabaseError(DatabaseErrorKind::SerializationFailure, _) => {
            Error::Unavailable(Box::new(e))
        }
        DieselError::BrokenTransactionManager => unavailable(e),
        other => Error::Internal(Box::new(other)),
    }
}

/// Whether the error is a unique violation (of any constraint).
pub(crate) fn is_unique_violation(e: &DieselError) -> bool {
    matches!(
        e,
        DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Message(&'static str);

    impl diesel::result::DatabaseErrorInformation for Message {
        fn message(&self) -> &str {
            self.0
        }
        fn details(&self) -> Option<&str> {
            None
        }
        fn hint(&self) -> Option<&str> {
            None
        }
        fn table_name(&self) -> Option<&str> {
            None
        }
        fn column_name(&self) -> Option<&str> {
            None
        }
        fn constraint_name(&self) -> Option<&str> {
            None
        }
        fn statement_position(&self) -> Option<i32> {
            None
        }
    }

    fn mapped(message: &'static str) -> Error {
        db_error(DieselError::DatabaseError(
            DatabaseErrorKind::Unknown,
            Box::new(Message(message)),
        ))
    }

    #[test]
    fn a_citus_worker_node_that_does_not_answer_is_unavailable_not_internal() {
        for message in [
            "connection to the remote node posture@10.0.0.7:5432 failed with the following \
             error: Connection refused",
            "could not establish any connections to the node 10.0.0.7:5432 after 5000 ms",
            "terminating connection due to administrator command",
            // Seen when a worker group's primary failed over, and when the coordinator's
            // did (cargo xtask chaos --citus).
            "could not commit transaction for shard 102119 on at least one active node",
            "postmaster was shut down, exiting",
            // Citus 13.2's own words for a worker connection lost or refused within a
            // transaction, and a write that reached a primary just demoted.
            "connection establishment for node 10.0.0.7:5432 failed",
            "failure on connection marked as essential: 10.0.0.7:5432",
            "failed to prepare transaction 'citus_0_1_2_3' on host 10.0.0.7:5432",
            "cannot execute UPDATE in a read-only transaction",
        ] {
            assert!(
                matches!(mapped(message), Error::Unavailable(_)),
                "{message}"
            );
        }
        assert!(matches!(
            mapped("relation \"findings\" does not exist"),
            Error::Internal(_)
        ));
    }
}
