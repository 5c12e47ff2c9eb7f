//! [`PgStore`]: the pools, caches and listeners every port implementation shares.

use std::{
    collections::{HashMap, HashSet},
    fmt,
    net::IpAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use chrono::{DateTime, Utc};

use diesel_async::{
    AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection as _,
    pooled_connection::{
        AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
        deadpool::{Object, Pool},
    },
};
use posture_domain::{Error, KeyId, clock::Clock};

use crate::{
    KeyCacheStats, PgConfig, caches, connect,
    error::{self, db_error},
    migrations,
    replay::ReplayState,
    wake,
};

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
    pub(crate) key_touches: Arc<KeyTouches>,
    pub(crate) key_cache: Arc<caches::KeyCache>,
    /// Set on a read replica's store: its primary, whose data versions it may take.
    pub(crate) replica: Option<Arc<ReplicaLink>>,
    /// For the dedicated `LISTEN` connections (workers, the key cache).
    pub(crate) listen: connect::Connector,
    pub(crate) listener: Arc<wake::Listener>,
    /// Most keys a customer may hold at once ([`PgConfig::max_active_keys`]).
    pub(crate) max_active_keys: u32,
    /// Whether uses are recorded ([`PgConfig::record_use`]).
    pub(crate) record_use: bool,
    pub(crate) clock: Arc<dyn Clock>,
    /// Whether the database is a Citus coordinator, once asked (`spanning.rs`).
    pub(crate) citus: Arc<tokio::sync::OnceCell<bool>>,
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
        manager_config.recycling_method =
            RecyclingMethod::CustomFunction(Box::new(|conn: &mut AsyncPgConnection| {
                Box::pin(async move {
                    if crate::pool_health::connections_suspect() {
                        connect::probe(conn).await?;
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
    /// Starts serving authenticated keys from memory, invalidated through `LISTEN` (call
    /// once per serving process, inside its runtime). Without it every request reads the
    /// key from the database.
    pub fn start_key_cache(&self) -> tokio::task::JoinHandle<()> {
        caches::follow_key_changes(self.listen.clone(), Arc::clone(&self.key_cache))
    }

    /// Hits and misses of the key cache.
    pub fn key_cache_stats(&self) -> KeyCacheStats {
        self.key_cache.stats()
    }

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
            record_use: config.record_use,
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
        connect::probe(&mut conn).await.map_err(db_error)
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

impl posture_domain::ports::DataChanges for PgStore {
    fn subscribe(
        &self,
        customer: posture_domain::CustomerId,
    ) -> Box<dyn posture_domain::ports::DataChangeSubscription> {
        caches::subscription(&self.key_cache, customer)
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

/// When each credential's use from each address was last written by this process (on the
/// store's clock), so a busy key costs one write a minute per address it is used from, not
/// one per request; and which refusals by allow-list this process has written to the audit
/// log, so each credential, address and hour costs one line.
pub(crate) struct KeyTouches {
    last: Mutex<HashMap<(KeyId, IpAddr), DateTime<Utc>>>,
    /// The writes of uses in flight: at most [`MAX_TOUCHES_IN_FLIGHT`]; a use that finds
    /// none free is not written (its `lastUsed*` lag, never a request).
    pub(crate) writes: Arc<tokio::sync::Semaphore>,
    refused: Mutex<Refusals>,
    hourly: Mutex<HashSet<(Hourly, KeyId, i64)>>,
    /// Writes decided since the start ([`PgStore::key_touches_started`]).
    started: AtomicU64,
}

const TOUCH_EVERY: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// Most writes of uses a process has in flight: a key used from ever new addresses costs at
/// most these connections of the pool, whatever its rate.
const MAX_TOUCHES_IN_FLIGHT: usize = 4;

impl Default for KeyTouches {
    fn default() -> Self {
        Self {
            last: Mutex::default(),
            writes: Arc::new(tokio::sync::Semaphore::new(MAX_TOUCHES_IN_FLIGHT)),
            refused: Mutex::default(),
            hourly: Mutex::default(),
            started: AtomicU64::default(),
        }
    }
}

/// The address a use is remembered by: IPv4 as is, IPv6 by its /64 (the unit one
/// subscriber holds: a client hopping between its addresses is one place).
fn place(from: IpAddr) -> IpAddr {
    match from {
        IpAddr::V4(_) => from,
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
    }
}

/// Most (credential, address) pairs remembered; past it the memory starts over (a write a
/// minute per pair is the worst that costs).
const MAX_REMEMBERED: usize = 50_000;

impl KeyTouches {
    /// Whether the use of `key` from `from` is due for a write at `now` (and records that
    /// it happens).
    pub(crate) fn due(&self, key: KeyId, from: IpAddr, now: DateTime<Utc>) -> bool {
        let mut touches = self
            .last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let from = place(from);
        match touches.get(&(key, from)) {
            Some(last) if now - *last < TOUCH_EVERY && now >= *last => false,
            _ => {
                if touches.len() >= MAX_REMEMBERED {
                    touches.retain(|_, at| now - *at < TOUCH_EVERY);
                    if touches.len() >= MAX_REMEMBERED {
                        touches.clear();
                    }
                }
                touches.insert((key, from), now);
                self.started.fetch_add(1, Ordering::Relaxed);
                true
            }
        }
    }

    /// Whether a refusal of `key` from `from` in the hour of `now` is to be written: this
    /// process's first of the credential, address and hour, and one of the credential's
    /// first [`MAX_REFUSED_ADDRESSES`] addresses of the hour (records it).
    pub(crate) fn first_refusal(&self, key: KeyId, from: IpAddr, now: DateTime<Utc>) -> bool {
        let hour = now.timestamp().div_euclid(3600);
        let mut refused = self
            .refused
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if refused.hour != hour {
            *refused = Refusals {
                hour,
                ..Refusals::default()
            };
        }
        let addresses = refused.per_key.entry(key).or_default();
        if *addresses >= MAX_REFUSED_ADDRESSES {
            return false;
        }
        if !refused.seen.insert((key, place(from))) {
            return false;
        }
        *refused.per_key.entry(key).or_default() += 1;
        true
    }

    /// Whether `what` of `key` in the hour of `now` is this process's first of the hour
    /// (and records it).
    pub(crate) fn first_of_hour(&self, what: Hourly, key: KeyId, now: DateTime<Utc>) -> bool {
        let hour = now.timestamp().div_euclid(3600);
        let mut seen = self
            .hourly
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if seen.len() >= MAX_REMEMBERED {
            seen.retain(|&(_, _, h)| h == hour);
        }
        seen.insert((what, key, hour))
    }
}

/// What a credential's audit lines of the hour are about ([`KeyTouches::first_of_hour`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Hourly {
    /// Access tokens issued to a client.
    Tokens,
    /// A refusal for inactivity.
    Lapsed,
}

/// The refusals by allow-list written this hour: which (credential, address), and how
/// many addresses of each credential.
#[derive(Default)]
pub(crate) struct Refusals {
    hour: i64,
    seen: HashSet<(KeyId, IpAddr)>,
    per_key: HashMap<KeyId, u32>,
}

/// Most addresses a credential's refusals are written for, per hour and instance: a
/// credential tried from a botnet adds at most this many lines an hour.
pub(crate) const MAX_REFUSED_ADDRESSES: u32 = 100;

/// A replica's store: its primary (for the cache and to fill it) and its replay state.
#[derive(Clone)]
pub(crate) struct ReplicaLink {
    pub(crate) primary: PgStore,
    pub(crate) state: Arc<ReplayState>,
}
