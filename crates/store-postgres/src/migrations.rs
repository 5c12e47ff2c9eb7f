//! The SQL migrations of `migrations/`, embedded in the binaries.
//!
//! They run through diesel's synchronous harness on an `AsyncConnectionWrapper` inside
//! `spawn_blocking` (diesel-async's own harness blocks in place, which panics on a
//! current-thread runtime and inside actix). A session advisory lock serialises instances
//! that migrate at the same time.

use std::sync::LazyLock;

use diesel::{Connection, RunQueryDsl, migration::MigrationSource, pg::Pg};
use diesel_async::{AsyncPgConnection, async_connection_wrapper::AsyncConnectionWrapper};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use posture_domain::Error;

/// Every migration of the repository, in order.
pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations");

/// Arbitrary but fixed: the advisory lock key that serialises migration runs.
const MIGRATION_LOCK: i64 = 0x706f_7374_7572_6501;

type SyncPg = AsyncConnectionWrapper<AsyncPgConnection>;

async fn with_connection<T: Send + 'static>(
    url: &str,
    f: impl FnOnce(&mut SyncPg) -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut conn = SyncPg::establish(&url).map_err(|e| Error::Unavailable(Box::new(e)))?;
        f(&mut conn)
    })
    .await
    .map_err(Error::internal)?
}

/// Applies the pending migrations; returns the versions applied.
pub async fn run_pending(url: &str) -> Result<Vec<String>, Error> {
    with_connection(url, |conn| {
        diesel::sql_query(format!("SELECT pg_advisory_lock({MIGRATION_LOCK})"))
            .execute(conn)
            .map_err(Error::internal)?;
        let applied = conn
            .run_pending_migrations(MIGRATIONS)
            .map(|versions| versions.iter().map(ToString::to_string).collect())
            .map_err(Error::Internal);
        diesel::sql_query(format!("SELECT pg_advisory_unlock({MIGRATION_LOCK})"))
            .execute(conn)
            .map_err(Error::internal)?;
        applied
    })
    .await
}

/// The names of the migrations not yet applied (empty when the schema is current).
pub async fn pending(url: &str) -> Result<Vec<String>, Error> {
    with_connection(url, |conn| {
        conn.pending_migrations(MIGRATIONS)
            .map(|ms| ms.iter().map(|m| m.name().to_string()).collect())
            .map_err(Error::Internal)
    })
    .await
}

/// The version of the newest migration embedded in this binary.
pub fn latest_version() -> Option<String> {
    static LATEST: LazyLock<Option<String>> = LazyLock::new(|| {
        let migrations = MigrationSource::<Pg>::migrations(&MIGRATIONS).ok()?;
        migrations
            .iter()
            .map(|m| m.name().version().to_string())
            .max()
    });
    LATEST.clone()
}
