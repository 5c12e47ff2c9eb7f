//! Migrations rolled back in a test's database, as an operator would.

use diesel_async::{AsyncPgConnection, async_connection_wrapper::AsyncConnectionWrapper};
use diesel_migrations::MigrationHarness as _;

/// Reverts the newest migration (its `down.sql`) through `conn`; returns its version.
/// PostgreSQL only: on Citus, run this way, the totals' `down.sql` failed with "cannot
/// insert multiple commands into a prepared statement" (not investigated further).
pub(crate) async fn last_migration(conn: AsyncPgConnection) -> String {
    tokio::task::spawn_blocking(move || {
        let mut conn = AsyncConnectionWrapper::<AsyncPgConnection>::from(conn);
        conn.revert_last_migration(posture_store_postgres::migrations::MIGRATIONS)
            .unwrap()
            .to_string()
    })
    .await
    .unwrap()
}
