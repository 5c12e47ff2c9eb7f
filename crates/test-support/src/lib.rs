//! Test harness shared by the integration tests of every crate.
//!
//! [`TestDb::new`] gives each test its own PostgreSQL database, cloned from a template that
//! was migrated once (`CREATE DATABASE ... TEMPLATE ...`, about 40 ms), so tests run in
//! parallel and never see each other's rows. The server comes from `TEST_DATABASE_URL`
//! (set by `cargo xtask test`, which starts a throwaway cluster when it is not given).
//! Nothing here mocks the database.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    reason = "test harness: failing loudly is the point"
)]

pub mod catalog;
pub mod cef;
pub mod citus;
pub mod fixtures;
pub mod logs;
pub mod pgbouncer;
pub mod proxy;
mod revert;
pub mod standard_webhooks;
mod template;
pub mod waits;

pub use posture_test_servers::servers;

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use posture_domain::clock::ManualClock;
use posture_store_postgres::{PgConfig, PgStore, migrations};

/// Arbitrary but fixed advisory-lock key guarding template creation.
const TEMPLATE_LOCK: i64 = 0x706f_7374_7572_6502;

/// The URL of the PostgreSQL server tests use (`TEST_DATABASE_URL`).
pub fn server_url() -> String {
    std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "TEST_DATABASE_URL is not set: run the tests with `cargo xtask test`, which starts \
             PostgreSQL and Redis, or set TEST_DATABASE_URL (and TEST_REDIS_URL) yourself"
        )
    })
}

/// The URL of the Redis server tests use (`TEST_REDIS_URL`).
pub fn redis_url() -> String {
    std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| {
        panic!("TEST_REDIS_URL is not set: run the tests with `cargo xtask test`")
    })
}

/// `url` with its database name replaced.
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_end..].find('/') {
        Some(slash) => &base[..authority_end + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{database}?{query}"),
        None => format!("{base}/{database}"),
    }
}

async fn admin_connection(server: &str) -> AsyncPgConnection {
    let url = with_database(server, "postgres");
    AsyncPgConnection::establish(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the test PostgreSQL server: {e}"))
}

async fn execute(conn: &mut AsyncPgConnection, sql: &str) {
    diesel::sql_query(sql)
        .execute(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Creates the migrated template once per server (and per migration set). On Citus
/// (`nodes` has workers) the template exists on every node under one name: made with the
/// extension, migrated through the coordinator (which distributes the schema), then closed
/// to connections on every node so that each node can copy its part.
async fn ensure_template(conn: &mut AsyncPgConnection, nodes: &[String], template: &str) {
    #[derive(diesel::QueryableByName)]
    struct Exists {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        exists: bool,
    }
    let server = &nodes[0];
    execute(conn, &format!("SELECT pg_advisory_lock({TEMPLATE_LOCK})")).await;
    let found: Exists =
        diesel::sql_query("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS exists")
            .bind::<diesel::sql_types::Text, _>(template)
            .get_result(conn)
            .await
            .unwrap();
    if !found.exists {
        // Build under a temporary name, then rename: a half-built template is never used.
        let building = format!("{template}_building");
        for node in nodes {
            let mut admin = admin_connection(node).await;
            execute(
                &mut admin,
                &format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"),
            )
            .await;
            // Roles belong to the node, not to a database: made on each.
            execute(
                &mut admin,
                &format!(
                    "DO $$ BEGIN CREATE ROLE {RUNTIME_ROLE} LOGIN PASSWORD '{RUNTIME_ROLE}'; \
                     EXCEPTION WHEN duplicate_object THEN NULL; END $$"
                ),
            )
            .await;
        }
        if nodes.len() > 1 {
            // Every statement the runtime role runs through the coordinator must reach one
            // shard, but those posture marks as spanning customers (`spanning.rs`): Citus
            // refuses the others, so a per-customer statement that spans shards fails its
            // test.
            execute(
                conn,
                &format!(
                    "ALTER ROLE {RUNTIME_ROLE} SET citus.multi_task_query_log_level = 'error'"
                ),
            )
            .await;
            citus::create_database(nodes, &building, with_database).await;
        } else {
            execute(conn, &format!("CREATE DATABASE {building}")).await;
        }
        let url = with_database(server, &building);
        migrations::run_pending(&url)
            .await
            .unwrap_or_else(|e| panic!("migrating the test template failed: {e:?}"));
        migrations::grant_runtime(&url, &RUNTIME_ROLE.parse().unwrap())
            .await
            .unwrap_or_else(|e| panic!("granting the test runtime role failed: {e:?}"));
        for node in nodes {
            let mut admin = admin_connection(node).await;
            if nodes.len() > 1 {
                // Citus keeps connections to its databases (its daemon, cached connections
                // between nodes): a database can be renamed or copied only without them.
                close_database(&mut admin, &building).await;
            }
            execute(
                &mut admin,
                &format!("ALTER DATABASE {building} RENAME TO {template}"),
            )
            .await;
        }
    }
    execute(conn, &format!("SELECT pg_advisory_unlock({TEMPLATE_LOCK})")).await;
}

/// Refuses new connections to `database` and ends the ones it has.
async fn close_database(admin: &mut AsyncPgConnection, database: &str) {
    execute(
        admin,
        &format!("ALTER DATABASE {database} WITH ALLOW_CONNECTIONS false"),
    )
    .await;
    execute(
        admin,
        &format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = '{database}' AND pid <> pg_backend_pid()"
        ),
    )
    .await;
}

/// The nodes a test database is made on: `server`, and on Citus (when `server` is the
/// suite's server) the workers of `TEST_CITUS_WORKERS` after it.
fn nodes_of(server: &str) -> Vec<String> {
    let mut nodes = vec![server.to_owned()];
    if std::env::var("TEST_DATABASE_URL").is_ok_and(|suite| suite == server) {
        nodes.extend(citus::test_workers().unwrap_or_default());
    }
    nodes
}

/// The role the stores of [`TestDb::store`] connect as: the privileges of
/// `posture-api migrate --runtime-role`, so every test that goes through a store proves
/// that the runtime grants suffice. Its password is its name.
pub const RUNTIME_ROLE: &str = "posture_test_runtime";

/// A database of its own for one test, dropped when the value is dropped.
pub struct TestDb {
    name: String,
    url: String,
    /// The URLs of the `postgres` database of each node the database is on, as a
    /// superuser: the server's, and on Citus the coordinator's, then the workers'.
    nodes: Vec<String>,
}

impl TestDb {
    pub async fn new() -> Self {
        Self::on(&server_url()).await
    }

    /// A database of its own on another server (a superuser's URL), for tests that start
    /// their own cluster (a primary with a standby).
    pub async fn on(server: &str) -> Self {
        let template = template::name();
        let nodes = nodes_of(server);
        let mut conn = admin_connection(server).await;
        ensure_template(&mut conn, &nodes, &template).await;
        let name = format!("posture_test_{}", uuid::Uuid::new_v4().simple());
        // On every node at once (on Citus each copies its own part of the template).
        futures_util::future::join_all(nodes.iter().map(|node| async {
            let mut admin = admin_connection(node).await;
            execute(
                &mut admin,
                &format!("CREATE DATABASE {name} TEMPLATE {template}"),
            )
            .await;
        }))
        .await;
        let url = with_database(server, &name);
        Self { name, url, nodes }
    }

    /// The URL of this test's database, as the role that owns its tables (for fixtures
    /// that reach under the ports).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL of this test's database as [`RUNTIME_ROLE`].
    pub fn runtime_url(&self) -> String {
        let mut url = url::Url::parse(&self.url).unwrap();
        url.set_username(RUNTIME_ROLE).unwrap();
        url.set_password(Some(RUNTIME_ROLE)).unwrap();
        url.into()
    }

    /// The address of the PostgreSQL server (for a proxy in front of it).
    pub fn server_addr(&self) -> std::net::SocketAddr {
        let url = url::Url::parse(&self.url).unwrap();
        let host = url.host_str().unwrap_or("127.0.0.1");
        std::net::ToSocketAddrs::to_socket_addrs(&(host, url.port().unwrap_or(5432)))
            .unwrap()
            .next()
            .unwrap()
    }

    /// This database's runtime URL with the server reached at `addr` (a proxy) instead.
    pub fn url_through(&self, addr: std::net::SocketAddr) -> String {
        let mut url = url::Url::parse(&self.runtime_url()).unwrap();
        url.set_ip_host(addr.ip()).unwrap();
        url.set_port(Some(addr.port())).unwrap();
        url.into()
    }

    /// Reverts the newest migration (its `down.sql`); returns its version.
    pub async fn revert_last_migration(&self) -> String {
        revert::last_migration(self.connection().await).await
    }

    /// Reverts migrations, the newest first, until the one of `version` (its digits, as
    /// `20261128000027`) is reverted too; returns the versions reverted, in that order.
    pub async fn revert_through(&self, version: &str) -> Vec<String> {
        let mut reverted = Vec::new();
        loop {
            let last = self.revert_last_migration().await;
            let done = last.replace('-', "") == version;
            assert!(
                reverted.len() < 100 && last.replace('-', "").as_str() > version || done,
                "migration {version} is not among those applied"
            );
            reverted.push(last);
            if done {
                return reverted;
            }
        }
    }

    /// Applies the pending migrations and grants the runtime role what they need, as
    /// `posture-api migrate --runtime-role` does; returns the versions applied.
    pub async fn migrate(&self) -> Vec<String> {
        let applied = migrations::run_pending(&self.url).await.unwrap();
        migrations::grant_runtime(&self.url, &RUNTIME_ROLE.parse().unwrap())
            .await
            .unwrap();
        applied
    }

    /// Whether this test's database is on Citus (a coordinator and workers).
    pub fn on_citus(&self) -> bool {
        self.nodes.len() > 1
    }

    /// A connection to this test's database.
    pub async fn connection(&self) -> AsyncPgConnection {
        AsyncPgConnection::establish(&self.url).await.unwrap()
    }

    /// Runs one SQL statement as the owner; returns the rows it changed.
    pub async fn execute(&self, sql: &str) -> usize {
        diesel_async::RunQueryDsl::execute(diesel::sql_query(sql), &mut self.connection().await)
            .await
            .unwrap()
    }

    /// The number `sql` (run as the owner) answers in its column `n`.
    pub async fn count(&self, sql: &str) -> i64 {
        #[derive(diesel::QueryableByName)]
        struct Count {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        let query = diesel::sql_query(sql);
        let mut conn = self.connection().await;
        let count: Count = diesel_async::RunQueryDsl::get_result(query, &mut conn)
            .await
            .unwrap();
        count.n
    }

    /// A database of its own with no schema at all (for migration tests).
    pub async fn empty() -> Self {
        let server = server_url();
        let mut conn = admin_connection(&server).await;
        let name = format!("posture_test_{}", uuid::Uuid::new_v4().simple());
        execute(&mut conn, &format!("CREATE DATABASE {name}")).await;
        let url = with_database(&server, &name);
        Self {
            name,
            url,
            nodes: vec![server],
        }
    }

    /// On Citus, a database of its own on every node with no schema and no extension: one
    /// PostgreSQL database on the coordinator, until [`TestDb::join_citus`] (for the
    /// distribution of a single-node database in place). `None` without Citus.
    pub async fn empty_on_every_node() -> Option<Self> {
        let server = server_url();
        let nodes = nodes_of(&server);
        if nodes.len() < 2 {
            return None;
        }
        let name = format!("posture_test_{}", uuid::Uuid::new_v4().simple());
        for node in &nodes {
            let mut admin = admin_connection(node).await;
            execute(&mut admin, &format!("CREATE DATABASE {name}")).await;
        }
        let url = with_database(&server, &name);
        Some(Self { name, url, nodes })
    }

    /// The extension on every node and the workers registered with the coordinator: what
    /// an operator does before `posture-api migrate` distributes the data in place.
    pub async fn join_citus(&self) {
        citus::join_database(&self.nodes, &self.name, with_database).await;
    }

    /// Rows per table of customer data, to show that a failed operation changed nothing.
    pub async fn row_counts(&self) -> Vec<(&'static str, i64)> {
        #[derive(diesel::QueryableByName)]
        struct Count {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        let mut conn = AsyncPgConnection::establish(&self.url).await.unwrap();
        let mut counts = Vec::new();
        for table in [
            "customers",
            "tenants",
            "analyzer_passes",
            "identities",
            "role_assignments",
            "findings",
            "finding_totals",
            "identity_totals",
            "role_recommendations",
            "upr_scores",
            "upr_latest",
        ] {
            let count: Count = diesel::sql_query(format!("SELECT count(*) AS n FROM {table}"))
                .get_result(&mut conn)
                .await
                .unwrap();
            counts.push((table, count.n));
        }
        counts
    }

    /// Asserts that the delivery log's totals (migration 000027, kept by the deliveries'
    /// triggers) equal a count of the deliveries, key by key; returns how many deliveries
    /// there are, so that a test can show it counted something.
    pub async fn assert_delivery_totals(&self) -> i64 {
        #[derive(diesel::QueryableByName, Debug, PartialEq)]
        struct Total {
            #[diesel(sql_type = diesel::sql_types::Text)]
            key: String,
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        let mut conn = self.connection().await;
        let key = "concat_ws(' ', customer_id, subscription_id, event_type, status)";
        let kept: Vec<Total> = diesel::sql_query(format!(
            "SELECT {key} AS key, total AS n FROM webhook_delivery_totals \
             WHERE total <> 0 ORDER BY 1"
        ))
        .load(&mut conn)
        .await
        .unwrap();
        let counted: Vec<Total> = diesel::sql_query(format!(
            "SELECT {key} AS key, count(*) AS n FROM webhook_deliveries GROUP BY 1 ORDER BY 1"
        ))
        .load(&mut conn)
        .await
        .unwrap();
        assert_eq!(
            kept, counted,
            "the delivery totals against a count of the deliveries"
        );
        counted.iter().map(|total| total.n).sum()
    }

    /// The settings of [`TestDb::store`]: a pool of 8 on this test's database, as the
    /// runtime role.
    pub fn config(&self) -> PgConfig {
        let mut config = PgConfig::new(self.runtime_url(), posture_domain::clock::system());
        config.max_connections = 8;
        config
    }

    /// A store on this test's database.
    pub fn store(&self) -> PgStore {
        PgStore::new(&self.config()).unwrap()
    }

    /// A store on this test's database reading a clock the test moves, standing at the
    /// system's time now.
    pub fn store_with_clock(&self) -> (PgStore, std::sync::Arc<ManualClock>) {
        let clock = std::sync::Arc::new(ManualClock::starting_now());
        let mut config = self.config();
        config.clock = clock.clone();
        (PgStore::new(&config).unwrap(), clock)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let name = std::mem::take(&mut self.name);
        let nodes = std::mem::take(&mut self.nodes);
        // Drop needs async I/O; do it on a runtime of its own, whatever runtime we are in.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                let dropped = futures_util::future::join_all(nodes.iter().map(|node| async {
                    let mut conn = admin_connection(node).await;
                    diesel::sql_query(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&mut conn)
                        .await
                        .map_err(std::io::Error::other)
                }))
                .await;
                dropped.into_iter().try_for_each(|d| d.map(drop))
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) && !std::thread::panicking() {
            eprintln!("warning: could not drop a test database");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_name_is_replaced_keeping_the_query() {
        assert_eq!(
            with_database(
                "postgres://u:p@127.0.0.1:5432/postgres?sslmode=disable",
                "t1"
            ),
            "postgres://u:p@127.0.0.1:5432/t1?sslmode=disable"
        );
        assert_eq!(
            with_database("postgres://127.0.0.1:5432", "t1"),
            "postgres://127.0.0.1:5432/t1"
        );
    }
}
