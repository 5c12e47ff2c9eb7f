//! Writes of one customer that must take turns: creations counted against a limit.

use diesel_async::RunQueryDsl as _;

/// The lock of a customer's user creations (with [`turn_of`]).
pub(super) const CREATING_USERS: i64 = 1002;
/// The lock of a customer's group creations.
pub(super) const CREATING_GROUPS: i64 = 1003;

/// Waits for the customer's turn at `what` until the caller's transaction ends: a lock of
/// the transaction on the coordinator (with Citus, where every statement starts; a lock of
/// a row would reach the customer's node and wait for a running pass).
pub(super) async fn turn_of(
    conn: &mut diesel_async::AsyncPgConnection,
    customer: uuid::Uuid,
    what: i64,
) -> diesel::QueryResult<()> {
    diesel::sql_query("SELECT pg_advisory_xact_lock(hashtextextended($1::text, $2))")
        .bind::<diesel::sql_types::Uuid, _>(customer)
        .bind::<diesel::sql_types::BigInt, _>(what)
        .execute(conn)
        .await
        .map(drop)
}
