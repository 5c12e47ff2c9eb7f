//! Waking the workers: the channel they `LISTEN` on for deliveries that became due, and
//! the connection a worker listens on.

use diesel_async::{AsyncPgConnection, RunQueryDsl};

/// The channel workers `LISTEN` on for deliveries that became due: a pass, a redelivery, a
/// recovery and a resume notify it.
pub(crate) const DELIVERY_CHANNEL: &str = "posture_deliveries";

/// Wakes the listening workers (when the caller's transaction commits).
pub(crate) async fn notify_workers(conn: &mut AsyncPgConnection) -> diesel::QueryResult<usize> {
    diesel::sql_query(format!("SELECT pg_notify('{DELIVERY_CHANNEL}', '')"))
        .execute(conn)
        .await
}

/// The dedicated connection that `LISTEN`s for queued deliveries.
#[derive(Default)]
pub(crate) struct Listener(pub(crate) tokio::sync::Mutex<Option<AsyncPgConnection>>);
