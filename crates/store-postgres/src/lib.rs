//! posture's PostgreSQL adapter: the Diesel schema of `migrations/` and implementations of
//! the domain ports on diesel-async with a deadpool connection pool.
//!
//! Every query of customer data takes the `CustomerScope` and filters `customer_id` in its
//! SQL; composite foreign keys make a row's tenant belong to the same customer. Database
//! errors become domain errors in `error.rs`, at the port boundary.

mod api_keys;
mod caches;
mod connect;
mod console;
mod customers;
mod data_versions;
mod deliveries;
mod error;
mod events;
mod export;
mod finding_rows;
mod findings;
mod idempotency;
mod identities;
mod ingest;
pub mod migrations;
mod pool_health;
mod recommendations;
mod replicas;
mod schema;
mod scim;
pub mod spanning;
mod sweeps;
mod sync;
mod tenants;
mod text;
mod triage;
mod triage_bulk;
mod triage_expiry;
mod upr;
mod webhooks;

use std::{
    collections::HashMap,
    fmt,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use chrono::{DateTime, Utc};

use diesel_async::{
    AsyncPgConnection, RunQueryDsl,
    pooled_connection::{
        AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
        deadpool::{Object, Pool},
    },
};
use posture_domain::{Error, KeyId, clock::Clock};

use crate::error::db_error;
pub use crate::{
    caches::{APPLICATION_NAME as KEY_CACHE_APPLICATION_NAME, KeyCacheStats, VersionLookups},
    ingest::planned_rows,
    replicas::{ReplicaPolicy, ReplicaStatus, Replicas},
};

/// The channel workers `LISTEN` on for deliveries that became due: a pass, a redelivery, a
/// recovery and a resume notify it.
pub(crate) const DELIVERY_CHANNEL: &str = "posture_deliveries";

/// Wakes the listening workers (when the caller's transaction commits).
pub(crate) async fn notify_workers(conn: &mut AsyncPgConnection) -> diesel::QueryResult<usize> {
    diesel::sql_query(format!("SELECT pg_notify('{DELIVERY_CHANNEL}', '')"))
        .execute(conn)
        .await
}

/// How to reach PostgreSQL.
#[derive(Clone)]
pub struct PgConfig {
    /// `postgres://user:password@host:port/db`; contains a secret, so `Debug` hides it.
    pub url: String,
    /// Where the dedicated `LISTEN` connections go (the key cache, the worker's wake-ups),
    /// when not `url`: a direct URL to PostgreSQL when `url` is a transaction-mode pooler
    /// (PgBouncer), which cannot carry `LISTEN`.
    pub listen_url: Option<String>,
    /// Most connections the pool opens.
    pub max_connections: usize,
    /// How long a caller waits for a connection (and a new connection for the server)
    /// before the request fails as unavailable.
    pub acquire_timeout: Duration,
    /// PostgreSQL's `statement_timeout` on every pooled connection (`None`: the server's).
    pub statement_timeout: Option<Duration>,
    /// PostgreSQL's `idle_in_transaction_session_timeout` on every pooled connection.
    pub idle_in_transaction_timeout: Option<Duration>,
    /// Most keys a customer may hold at once (neither revoked nor expired): issuing one
    /// more is refused.
    pub max_active_keys: u32,
    /// The clock of the store's own decisions (a cached key's expiry, a console session's
    /// idle time and lifetime, a sign-in's lapse, a secret's overlap): the system's, or a
    /// test's.
    pub clock: Arc<dyn Clock>,
}

impl PgConfig {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            listen_url: None,
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout: None,
            idle_in_transaction_timeout: None,
            max_active_keys: posture_domain::api_key::DEFAULT_MAX_ACTIVE_KEYS,
            clock: posture_domain::clock::system(),
        }
    }
}

impl PgConfig {
    /// The `SET` statements every new pooled connection runs: the timeouts, and server
    /// messages in English where the role may choose them ([`error::ENGLISH_MESSAGES`]).
    fn session_settings(&self) -> String {
        let mut sql = String::from(error::ENGLISH_MESSAGES);
        for (name, value) in [
            ("statement_timeout", self.statement_timeout),
            (
                "idle_in_transaction_session_timeout",
                self.idle_in_transaction_timeout,
            ),
        ] {
            if let Some(value) = value {
                sql.push_str(&format!("SET {name} = {};", value.as_millis()));
            }
        }
        sql
    }
}

impl fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgConfig")
            .field("url", &"<redacted>")
            .field(
                "listen_url",
                &self.listen_url.as_ref().map(|_| "<redacted>"),
            )
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field(
                "idle_in_transaction_timeout",
                &self.idle_in_transaction_timeout,
            )
            .finish()
    }
}

/// Pool usage, for metrics and readiness.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStatus {
    pub max_size: usize,
    pub size: usize,
    pub available: usize,
    pub waiting: usize,
}

/// The PostgreSQL implementation of posture's ports. Cheap to clone (shares the pool).
#[derive(Clone)]
pub struct PgStore {
    pool: Pool<AsyncPgConnection>,
    /// How to build another pool like `pool`.
    recipe: Arc<PoolRecipe>,
    /// The pools of the HTTP workers' stores, for [`PgStore::status`].
    worker_pools: Arc<Mutex<Vec<Pool<AsyncPgConnection>>>>,
    key_touches: Arc<KeyTouches>,
    key_cache: Arc<caches::KeyCache>,
    /// Set on a read replica's store: its primary, whose data versions it may take.
    replica: Option<Arc<data_versions::ReplicaLink>>,
    /// For the dedicated `LISTEN` connections (workers, the key cache).
    listen: connect::Connector,
    listener: Arc<deliveries::Listener>,
    /// Most keys a customer may hold at once ([`PgConfig::max_active_keys`]).
    max_active_keys: u32,
    clock: Arc<dyn Clock>,
    /// Whether the database is a Citus coordinator, once asked (`spanning.rs`).
    citus: Arc<tokio::sync::OnceCell<bool>>,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("pool", &self.status())
            .finish()
    }
}

/// What every pool of a store is built from: where it connects and how each new connection
/// is set up.
struct PoolRecipe {
    url: String,
    connector: connect::Connector,
    settings: String,
    acquire_timeout: Duration,
}

impl PoolRecipe {
    /// A pool of at most `size` connections, opened on demand.
    fn pool(&self, size: usize) -> Result<Pool<AsyncPgConnection>, Error> {
        let mut manager_config = ManagerConfig::default();
        // Reuse costs nothing in steady state; after a connection-class failure, each
        // connection is checked before reuse for a while (error.rs).
        manager_config.recycling_method = RecyclingMethod::CustomFunction(Box::new(|conn| {
            Box::pin(async move {
                if crate::pool_health::connections_suspect() {
                    use diesel_async::RunQueryDsl as _;
                    diesel::sql_query("SELECT 1").execute(conn).await?;
                }
                Ok(())
            })
        }));
        let settings = self.settings.clone();
        let connector = self.connector.clone();
        manager_config.custom_setup = Box::new(move |_| {
            let settings = settings.clone();
            let connector = connector.clone();
            Box::pin(async move {
                use diesel_async::SimpleAsyncConnection as _;
                let mut conn = connector.connect().await?;
                if !settings.is_empty() {
                    conn.batch_execute(&settings)
                        .await
                        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
                }
                Ok(conn)
            })
        });
        let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(
            self.url.clone(),
            manager_config,
        );
        Pool::builder(manager)
            .max_size(size)
            .wait_timeout(Some(self.acquire_timeout))
            .create_timeout(Some(self.acquire_timeout))
            .recycle_timeout(Some(self.acquire_timeout))
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .map_err(Error::internal)
    }
}

impl PgStore {
    /// How many `last_used_at` writes this store has decided (each runs off the request
    /// path): a test counts them instead of waiting for one that should not come.
    pub fn key_touches_started(&self) -> u64 {
        AtomicU64::load(&self.key_touches.started, Ordering::Relaxed)
    }
}

impl PgStore {
    /// A store on a new pool. Connections are opened on demand; call [`PgStore::ping`] to
    /// fail fast at start-up.
    pub fn new(config: &PgConfig) -> Result<Self, Error> {
        let connector = connect::Connector::new(&config.url)?;
        let listen = match &config.listen_url {
            Some(url) => connect::Connector::new(url)?,
            None => connector.clone(),
        };
        let recipe = Arc::new(PoolRecipe {
            url: config.url.clone(),
            connector,
            settings: config.session_settings(),
            acquire_timeout: config.acquire_timeout,
        });
        let pool = recipe.pool(config.max_connections)?;
        Ok(Self {
            pool,
            recipe,
            worker_pools: Arc::default(),
            key_touches: Arc::default(),
            key_cache: Arc::default(),
            replica: None,
            listen,
            listener: Arc::default(),
            max_active_keys: config.max_active_keys,
            clock: config.clock.clone(),
            citus: Arc::default(),
        })
    }

    /// The store of one HTTP worker: the same caches and listeners, and a pool of `size`
    /// connections of its own, for its statements. A connection's protocol task runs on the
    /// runtime that opened it, so a pool used by one single-threaded worker keeps every
    /// round trip on that worker's thread, where a shared pool hands each one across
    /// threads (measured: docs/performance.md, "Overhead per request").
    pub fn for_worker(&self, size: usize) -> Result<Self, Error> {
        let pool = self.recipe.pool(size.max(1))?;
        self.worker_pools
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(pool.clone());
        Ok(Self {
            pool,
            worker_pools: Arc::default(),
            ..self.clone()
        })
    }

    /// A pooled connection; `Unavailable` when none can be had in time.
    pub(crate) async fn conn(&self) -> Result<Object<AsyncPgConnection>, Error> {
        self.pool
            .get()
            .await
            .map_err(|e| Error::Unavailable(Box::new(e)))
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<(), Error> {
        let mut conn = self.conn().await?;
        diesel::sql_query("SELECT 1")
            .execute(&mut conn)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// The language of the server's messages on posture's connections (`lc_messages`) when
    /// it is not English: connection failures are then not told from other errors (500
    /// instead of 503). `None` when it is English, or the server's default. The binaries
    /// warn at start-up with the fix (docs/operations.md).
    pub async fn messages_not_in_english(&self) -> Result<Option<String>, Error> {
        #[derive(diesel::QueryableByName)]
        struct Setting {
            #[diesel(sql_type = diesel::sql_types::Text)]
            value: String,
        }
        let mut conn = self.conn().await?;
        let setting: Setting = diesel::sql_query("SELECT current_setting('lc_messages') AS value")
            .get_result(&mut conn)
            .await
            .map_err(db_error)?;
        Ok((!error::is_english(&setting.value)).then_some(setting.value))
    }

    /// At start-up: warns, with the fix, when the server's messages are not in English on
    /// posture's connections (see [`PgStore::messages_not_in_english`]).
    pub async fn warn_unless_messages_in_english(&self) {
        match self.messages_not_in_english().await {
            Ok(None) => {}
            Ok(Some(lc_messages)) => tracing::warn!(
                lc_messages,
                "PostgreSQL answers posture in another language than English and this role \
                 may not change it: a lost connection or a statement timeout then answers 500 \
                 instead of 503 with Retry-After. Fix: GRANT SET ON PARAMETER lc_messages TO \
                 <posture's role> (PostgreSQL 15+), or ALTER ROLE <posture's role> SET \
                 lc_messages = 'C' (see docs/operations.md)"
            ),
            Err(e) => tracing::warn!(error = %e, "reading lc_messages failed"),
        }
    }

    /// The clock of the store's decisions, for the code that shares them (the HTTP state,
    /// the console, the delivery worker): one clock per process, so a test moves them all.
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// The pool's usage; for a store whose HTTP workers have pools of their own
    /// ([`PgStore::for_worker`]), the sum of its pool and theirs.
    pub fn status(&self) -> PoolStatus {
        let workers = self
            .worker_pools
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        std::iter::once(&self.pool)
            .chain(workers.iter())
            .map(Pool::status)
            .fold(PoolStatus::default(), |sum, status| PoolStatus {
                max_size: sum.max_size + status.max_size,
                size: sum.size + status.size,
                available: sum.available + status.available,
                waiting: sum.waiting + status.waiting,
            })
    }
}

#[async_trait::async_trait]
impl posture_domain::ports::StoreHealth for PgStore {
    async fn ping(&self) -> Result<(), Error> {
        PgStore::ping(self).await
    }

    async fn schema_is_current(&self) -> Result<bool, Error> {
        #[derive(diesel::QueryableByName)]
        struct Latest {
            #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
            version: Option<String>,
        }
        let mut conn = self.conn().await?;
        let applied: Latest =
            diesel::sql_query("SELECT max(version) AS version FROM __diesel_schema_migrations")
                .get_result(&mut conn)
                .await
                .map_err(db_error)?;
        Ok(applied.version >= migrations::latest_version())
    }
}

/// When each key's `last_used_at` was last written by this process (on the store's clock),
/// so a busy key costs one write a minute, not one per request.
#[derive(Default)]
struct KeyTouches {
    last: Mutex<HashMap<KeyId, DateTime<Utc>>>,
    /// Writes decided since the start ([`PgStore::key_touches_started`]).
    started: AtomicU64,
}

const TOUCH_EVERY: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

impl KeyTouches {
    /// Whether `last_used_at` of this key is due for a write at `now` (and records that it
    /// happens).
    fn due(&self, key: KeyId, now: DateTime<Utc>) -> bool {
        let mut touches = self
            .last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match touches.get(&key) {
            Some(last) if now - *last < TOUCH_EVERY && now >= *last => false,
            _ => {
                touches.insert(key, now);
                self.started.fetch_add(1, Ordering::Relaxed);
                true
            }
        }
    }
}
