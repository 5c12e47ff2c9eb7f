//! The SQL migrations of `migrations/`, embedded in the binaries.
//!
//! They run through diesel's synchronous harness on an `AsyncConnectionWrapper` inside
//! `spawn_blocking` (diesel-async's own harness blocks in place, which panics on a
//! current-thread runtime and inside actix). A session advisory lock serialises instances
//! that migrate at the same time.

use std::sync::LazyLock;

use diesel::{RunQueryDsl, migration::MigrationSource, pg::Pg};
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
    let connector = crate::connect::Connector::new(url)?;
    tokio::task::spawn_blocking(move || {
        let conn = tokio::runtime::Handle::current()
            .block_on(connector.connect())
            .map_err(|e| Error::Unavailable(Box::new(e)))?;
        f(&mut SyncPg::from(conn))
    })
    .await
    .map_err(Error::internal)?
}

/// Applies the pending migrations; returns the versions applied.
///
/// On a Citus coordinator (a database with the `citus` extension) the schema is then
/// distributed by customer (`posture_distribute()`, migration 17: idempotent, so a schema
/// distributed already is left as it is); on PostgreSQL without Citus nothing else happens.
pub async fn run_pending(url: &str) -> Result<Vec<String>, Error> {
    with_connection(url, |conn| {
        diesel::sql_query(format!("SELECT pg_advisory_lock({MIGRATION_LOCK})"))
            .execute(conn)
            .map_err(Error::internal)?;
        let applied = migrate_locked(conn);
        if applied.is_err() {
            // A migration that failed inside a `BEGIN ... COMMIT` block of its own (one that
            // runs outside the harness's transaction) leaves the session in that failed block:
            // end it, so the unlock runs and the migration's own error is the one reported.
            let _ = diesel::connection::SimpleConnection::batch_execute(conn, "ROLLBACK");
        }
        let unlocked = diesel::sql_query(format!("SELECT pg_advisory_unlock({MIGRATION_LOCK})"))
            .execute(conn)
            .map_err(Error::internal);
        let applied = applied?;
        unlocked?;
        Ok(applied)
    })
    .await
}

/// [`run_pending`] under the migration lock.
fn migrate_locked(conn: &mut SyncPg) -> Result<Vec<String>, Error> {
    let citus = has_citus(conn)?;
    if citus {
        // A migration that adds a trigger to a distributed table (posture's touch only their
        // own row or the customer's colocated rows: docs/operations.md).
        diesel::sql_query("SET citus.enable_unsafe_triggers = on")
            .execute(conn)
            .map_err(Error::internal)?;
    }
    let applied = conn
        .run_pending_migrations(MIGRATIONS)
        .map(|versions| versions.iter().map(ToString::to_string).collect())
        .map_err(Error::Internal)?;
    if citus {
        diesel::sql_query("SELECT posture_distribute()")
            .execute(conn)
            .map_err(Error::internal)?;
    }
    Ok(applied)
}

/// Whether the database is a Citus coordinator (has the `citus` extension).
fn has_citus(conn: &mut SyncPg) -> Result<bool, Error> {
    #[derive(diesel::QueryableByName)]
    struct Citus {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        present: bool,
    }
    let found: Citus = diesel::sql_query(
        "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS present",
    )
    .get_result(conn)
    .map_err(Error::internal)?;
    Ok(found.present)
}

/// The names of the migrations not yet applied (empty when the schema is current).
///
/// Reads the migration table only: diesel's own `pending_migrations` first creates that table
/// if missing, which the runtime role (no CREATE on the schema) may not even attempt.
pub async fn pending(url: &str) -> Result<Vec<String>, Error> {
    #[derive(diesel::QueryableByName)]
    struct Applied {
        #[diesel(sql_type = diesel::sql_types::Text)]
        version: String,
    }
    #[derive(diesel::QueryableByName)]
    struct Exists {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        exists: bool,
    }
    with_connection(url, |conn| {
        let table: Exists = diesel::sql_query(
            "SELECT to_regclass('__diesel_schema_migrations') IS NOT NULL AS exists",
        )
        .get_result(conn)
        .map_err(Error::internal)?;
        let applied: Vec<String> = if table.exists {
            diesel::sql_query("SELECT version FROM __diesel_schema_migrations")
                .load::<Applied>(conn)
                .map_err(Error::internal)?
                .into_iter()
                .map(|a| a.version)
                .collect()
        } else {
            Vec::new()
        };
        let migrations = MigrationSource::<Pg>::migrations(&MIGRATIONS).map_err(Error::Internal)?;
        Ok(migrations
            .iter()
            .filter(|m| !applied.contains(&m.name().version().to_string()))
            .map(|m| m.name().to_string())
            .collect())
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

/// The privileges of the runtime role, applied by [`grant_runtime`].
pub const RUNTIME_GRANTS: &str = include_str!("runtime_grants.sql");

/// The name of the role `serve` and the worker connect as: a plain lower-case PostgreSQL
/// identifier, so it needs no quoting wherever it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeRole(String);

/// Why a name cannot be the runtime role's.
#[derive(Debug, thiserror::Error)]
pub enum NotARoleName {
    #[error(
        "{0:?} is not a plain role name (lower-case letters, digits and _, at most 63 \
         characters, not starting with a digit)"
    )]
    NotPlain(String),
    #[error("{0:?}: roles named pg_* belong to PostgreSQL")]
    Reserved(String),
}

impl std::str::FromStr for RuntimeRole {
    type Err = NotARoleName;

    fn from_str(name: &str) -> Result<Self, NotARoleName> {
        let mut chars = name.chars();
        let plain = chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !plain || name.len() > 63 {
            return Err(NotARoleName::NotPlain(name.to_owned()));
        }
        if name.starts_with("pg_") {
            return Err(NotARoleName::Reserved(name.to_owned()));
        }
        Ok(Self(name.to_owned()))
    }
}

impl std::fmt::Display for RuntimeRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Gives `role` exactly the privileges of `runtime_grants.sql` on the schema at `url`,
/// revoking any others it held there, in one transaction. The role must exist (it is
/// created with its password by whoever manages the database's roles), must not be the
/// connecting role (which owns the tables) and must not be a superuser (which no grant
/// can restrict).
pub async fn grant_runtime(url: &str, role: &RuntimeRole) -> Result<(), Error> {
    #[derive(diesel::QueryableByName)]
    struct Role {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        exists: bool,
        #[diesel(sql_type = diesel::sql_types::Bool)]
        superuser: bool,
        #[diesel(sql_type = diesel::sql_types::Bool)]
        is_current: bool,
    }
    let role = role.clone();
    with_connection(url, move |conn| {
        let found: Role = diesel::sql_query(
            "SELECT count(r.rolname) > 0 AS exists, coalesce(bool_or(r.rolsuper), false) AS superuser, \
                    coalesce(bool_or(r.rolname = current_user), false) AS is_current \
             FROM pg_roles r WHERE r.rolname = $1",
        )
        .bind::<diesel::sql_types::Text, _>(&role.0)
        .get_result(conn)
        .map_err(Error::internal)?;
        if !found.exists {
            return Err(Error::invalid(
                "runtime role",
                format!(
                    "role {role} does not exist: create it first, e.g. \
                     CREATE ROLE {role} LOGIN PASSWORD '...'"
                ),
            ));
        }
        if found.is_current {
            return Err(Error::invalid(
                "runtime role",
                format!("{role} is the role running the migrations; name another one"),
            ));
        }
        if found.superuser {
            return Err(Error::invalid(
                "runtime role",
                format!("{role} is a superuser, which no grant restricts; name another one"),
            ));
        }
        let grants = RUNTIME_GRANTS.replace("{role}", &role.0);
        diesel::connection::SimpleConnection::batch_execute(
            conn,
            &format!("BEGIN;\n{grants}\nCOMMIT;"),
        )
        .map_err(Error::internal)
    })
    .await
}
