//! [`RedisRateLimiter`] counts requests of every `posture-api` instance together: one
//! atomic Lua script per check increments the window's counter and sets its expiry (no
//! read-then-write race), on Redis's own clock (so instances agree on window boundaries
//! whatever their clocks). When Redis cannot be reached it falls back to counting in this
//! process — requests are never refused because of Redis — warns once per outage, retries
//! Redis at most once a second, and says so in its [`LimiterState`]. A check waits 250 ms
//! for Redis; a connection slower to make than that is made in the background (within 5 s)
//! and used from the next retry on.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use async_trait::async_trait;
use deadpool_redis::{
    Manager, Pool, Runtime,
    redis::{AsyncConnectionConfig, aio::MultiplexedConnection},
};
use posture_domain::{
    Error, Result,
    clock::Clock,
    rate_limit::{LimiterState, RateBucket, RateDecision, RateLimiter, RatePolicy},
};

use crate::{in_process::InProcessRateLimiter, places::InProcessPlaces};

/// Counts one request in the bucket's current window (ARGV: the window's length, the
/// bucket's phase): returns {count, reset (epoch s), now (epoch s)}.
const CHECK_SCRIPT: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1])
local window = tonumber(ARGV[1])
local phase = tonumber(ARGV[2])
local index = math.floor((now + phase) / window)
local reset = (index + 1) * window - phase
local key = KEYS[1] .. ':' .. index
local count = redis.call('INCR', key)
if count == 1 then
  redis.call('EXPIREAT', key, reset + 1)
end
return {count, reset, now}
";

/// The count of the bucket's current window, without counting: returns {count, reset, now}.
const PEEK_SCRIPT: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1])
local window = tonumber(ARGV[1])
local phase = tonumber(ARGV[2])
local index = math.floor((now + phase) / window)
local count = redis.call('GET', KEYS[1] .. ':' .. index)
return {tonumber(count or '0'), (index + 1) * window - phase, now}
";

/// Spends a cost of the bucket's current window if all of it fits (ARGV: the window's
/// length, the bucket's phase, the cost, the limit): returns {count before, reset, now}.
const SPEND_SCRIPT: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1])
local window = tonumber(ARGV[1])
local phase = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local index = math.floor((now + phase) / window)
local reset = (index + 1) * window - phase
local key = KEYS[1] .. ':' .. index
local count = tonumber(redis.call('GET', key) or '0')
if count + cost <= limit then
  redis.call('INCRBY', key, cost)
  redis.call('EXPIREAT', key, reset + 1)
end
return {count, reset, now}
";

/// How long a check may wait for Redis before the in-process limiter answers.
const REDIS_TIMEOUT: Duration = Duration::from_millis(250);
/// How long making a connection may take (TCP, TLS, AUTH, given to redis-rs and to the
/// pool). It goes on in a task of its own
/// when the check that started it stops waiting: a Redis whose handshake takes longer than
/// a check may wait (a distant one over TLS) is then used from the next retry on, where
/// an attempt cut off with the check would never have finished.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often Redis is retried during an outage.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Why a check could not be answered by Redis.
#[derive(Debug, thiserror::Error)]
enum RedisFailure {
    #[error("no connection from the pool")]
    Pool(#[source] Arc<deadpool_redis::PoolError>),
    #[error("the command failed")]
    Command(#[source] redis::RedisError),
    #[error("no answer within {} ms", REDIS_TIMEOUT.as_millis())]
    Timeout,
}

/// The kept connection, or the one being made.
#[derive(Default)]
struct Slot {
    /// The connection and its number: a failure drops it only if it is still the one that
    /// failed (not a newer one made meanwhile).
    connection: Option<(u64, MultiplexedConnection)>,
    /// Connections made so far.
    made: u64,
    /// Whether the last attempt to make one failed (its error is logged once a run of them).
    failing: bool,
    /// Tells the checks waiting for the connection being made how it ended.
    connecting: Option<tokio::sync::watch::Receiver<Option<Connected>>>,
}

/// How making a connection ended.
type Connected = std::result::Result<(u64, MultiplexedConnection), Arc<deadpool_redis::PoolError>>;

struct Health {
    /// When the current outage started (epoch seconds); `None` while Redis answers.
    degraded_since: Option<u64>,
    next_probe: Instant,
}

/// The rate limiter shared through Redis, with an in-process fallback.
///
/// Checks go over one multiplexed connection (concurrent commands are pipelined on it),
/// made by the pool and taken out of it, and kept until a check on it fails. Checking a
/// connection out of the pool for every request would cost a `PING` each time.
pub struct RedisRateLimiter {
    pool: Pool,
    connection: Arc<Mutex<Slot>>,
    policy: RatePolicy,
    script: redis::Script,
    peek_script: redis::Script,
    spend_script: redis::Script,
    fallback: InProcessRateLimiter,
    /// The places taken while Redis is unreachable.
    pub(crate) places: InProcessPlaces,
    /// How long a place lasts unrenewed ([`posture_domain::rate_limit::PLACE_LEASE`]).
    pub(crate) place_lease: Duration,
    health: Mutex<Health>,
}

impl RedisRateLimiter {
    /// A limiter on `url` (`redis://host:port/db`). Connections are made on demand; while
    /// Redis is unreachable, the fallback counts in process on `clock`.
    pub fn new(url: &str, policy: RatePolicy, clock: Arc<dyn Clock>) -> Result<Self> {
        // redis-rs gives up making a connection after 1 s unless told otherwise.
        let making = AsyncConnectionConfig::new().set_connection_timeout(Some(CONNECT_TIMEOUT));
        let manager = Manager::new_with_config(url, making)
            .map_err(|e| Error::invalid("REDIS_URL", e.to_string()))?;
        let pool = Pool::builder(manager)
            .max_size(32)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| Error::invalid("REDIS_URL", e.to_string()))?;
        Ok(Self {
            pool,
            connection: Arc::default(),
            policy,
            script: redis::Script::new(CHECK_SCRIPT),
            peek_script: redis::Script::new(PEEK_SCRIPT),
            spend_script: redis::Script::new(SPEND_SCRIPT),
            places: InProcessPlaces::new(),
            place_lease: posture_domain::rate_limit::PLACE_LEASE,
            fallback: InProcessRateLimiter::new(policy, clock),
            health: Mutex::new(Health {
                degraded_since: None,
                next_probe: Instant::now(),
            }),
        })
    }

    /// Places lapse after `lease` unrenewed (tests shorten it).
    #[must_use]
    pub fn with_place_lease(mut self, lease: Duration) -> Self {
        self.place_lease = lease;
        self
    }

    /// Whether Redis answers within the time a check waits for it. The connection it needs
    /// is made as a check's is: if it takes longer, it is made all the same, for the checks.
    pub async fn ping(&self) -> Result<()> {
        let unavailable = |e: RedisFailure| Error::Unavailable(Box::new(e));
        let pong = tokio::time::timeout(REDIS_TIMEOUT, async {
            let (_, mut conn) = self.connection().await?;
            redis::cmd("PING")
                .query_async::<String>(&mut conn)
                .await
                .map_err(RedisFailure::Command)
        })
        .await
        .map_err(|_| unavailable(RedisFailure::Timeout))?
        .map_err(unavailable)?;
        if pong == "PONG" {
            Ok(())
        } else {
            Err(Error::internal(format!("PING answered {pong:?}")))
        }
    }

    /// The shared multiplexed connection and its number. Without one, a new one is made
    /// from the pool in a task of its own (one at a time), which keeps it even if this check
    /// stops waiting.
    async fn connection(&self) -> std::result::Result<(u64, MultiplexedConnection), RedisFailure> {
        // Twice at most: a task dropped before it said how it ended (its runtime stopped)
        // is replaced once; a loop could spin without ever yielding to the check's timeout.
        for _ in 0..2 {
            let mut ended = {
                let mut slot = lock(&self.connection);
                if let Some(kept) = &slot.connection {
                    return Ok(kept.clone());
                }
                self.start_connecting(&mut slot)
            };
            // `None` only when the task ended without a word: its channel goes, for another.
            let connected = ended
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|c| c.clone());
            if let Some(connected) = connected {
                return connected.map_err(RedisFailure::Pool);
            }
            let mut slot = lock(&self.connection);
            if slot
                .connecting
                .as_ref()
                .is_some_and(|c| c.same_channel(&ended))
            {
                slot.connecting = None;
            }
        }
        Err(RedisFailure::Timeout)
    }

    /// Runs the counting, peeking or spending script on `bucket` in Redis.
    async fn shared(
        &self,
        conn: &mut MultiplexedConnection,
        bucket: &RateBucket,
        look: Look,
    ) -> redis::RedisResult<RateDecision> {
        let script = match look {
            Look::Count => &self.script,
            Look::Peek => &self.peek_script,
            Look::Spend(_) => &self.spend_script,
        };
        let mut invocation = script.key(bucket_key(bucket));
        invocation
            .arg(self.policy.window_secs.max(1))
            .arg(self.policy.phase(bucket));
        if let Look::Spend(cost) = look {
            invocation.arg(cost).arg(self.policy.limit);
        }
        let (count, reset, now): (u64, u64, u64) = invocation.invoke_async(conn).await?;
        Ok(match look {
            Look::Count => self.policy.decide(count, reset, now),
            Look::Peek => self.policy.peeked(count, reset, now),
            Look::Spend(cost) => self.policy.spent(count, u64::from(cost), reset, now),
        })
    }

    /// Looks at `bucket` in Redis when it may be tried, else (or when it fails) in this
    /// process: a check never fails because Redis does.
    async fn look(&self, bucket: &RateBucket, look: Look) -> RateDecision {
        if let Some(decision) = self
            .on_redis(|mut conn| async move { self.shared(&mut conn, bucket, look).await })
            .await
        {
            return decision;
        }
        let now = self.fallback.now();
        match look {
            Look::Count => self.fallback.check_at(bucket, now),
            Look::Peek => self.fallback.peek_at(bucket, now),
            Look::Spend(cost) => self.fallback.spend_at(bucket, cost, now),
        }
    }

    /// What `ask` gets from Redis on the shared connection, when Redis may be tried and
    /// answers within [`REDIS_TIMEOUT`]; `None` otherwise (the caller answers in this
    /// process, and a failure is counted in the limiter's health).
    pub(crate) async fn on_redis<T, F, Fut>(&self, ask: F) -> Option<T>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        if !self.should_try_redis() {
            return None;
        }
        let mut used = None;
        let attempt = async {
            let (number, conn) = self.connection().await?;
            used = Some(number);
            ask(conn).await.map_err(RedisFailure::Command)
        };
        match tokio::time::timeout(REDIS_TIMEOUT, attempt).await {
            Ok(Ok(answered)) => {
                self.redis_answered();
                Some(answered)
            }
            Ok(Err(error)) => {
                self.redis_failed(&error, used);
                None
            }
            Err(_) => {
                self.redis_failed(&RedisFailure::Timeout, used);
                None
            }
        }
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        lock(&self.health)
    }

    /// Whether to ask Redis for this request: always while healthy, once a second while not.
    fn should_try_redis(&self) -> bool {
        let mut health = self.health();
        if health.degraded_since.is_none() {
            return true;
        }
        let now = Instant::now();
        if now >= health.next_probe {
            health.next_probe = now + PROBE_EVERY;
            return true;
        }
        false
    }

    /// The connection being made, started now if none is: one at a time, in a task of its
    /// own (a slow handshake goes on after the check that started it stops waiting).
    fn start_connecting(&self, slot: &mut Slot) -> tokio::sync::watch::Receiver<Option<Connected>> {
        if let Some(ended) = &slot.connecting {
            return ended.clone();
        }
        let (tell, ended) = tokio::sync::watch::channel(None);
        slot.connecting = Some(ended.clone());
        tokio::spawn(connect(self.pool.clone(), self.connection.clone(), tell));
        ended
    }

    /// `used`: the number of the connection that failed, if the check got one.
    fn redis_failed(&self, error: &RedisFailure, used: Option<u64>) {
        // That connection may be dead: a fresh one is made at once, for the next retry (a
        // slow handshake would otherwise take that retry too). A newer one, or one being
        // made, is new and stays.
        {
            let mut slot = lock(&self.connection);
            if used.is_some() && slot.connection.as_ref().map(|(number, _)| *number) == used {
                slot.connection = None;
                self.start_connecting(&mut slot);
            }
        }
        let mut health = self.health();
        health.next_probe = Instant::now() + PROBE_EVERY;
        if health.degraded_since.is_none() {
            health.degraded_since = Some(self.fallback.now());
            tracing::warn!(
                error = error as &dyn std::error::Error,
                "Redis is unreachable: rate limits are counted per instance until it is back"
            );
        }
    }

    fn redis_answered(&self) {
        let mut health = self.health();
        if let Some(since) = health.degraded_since.take() {
            tracing::info!(
                outage_secs = self.fallback.now().saturating_sub(since),
                "Redis is reachable again: rate limits are shared"
            );
        }
    }
}

/// Makes a connection from `pool` into `slot`, and tells the checks waiting for it.
async fn connect(
    pool: Pool,
    slot: Arc<Mutex<Slot>>,
    tell: tokio::sync::watch::Sender<Option<Connected>>,
) {
    let connected = pool
        .get()
        .await
        .map(deadpool_redis::Connection::take)
        .map_err(Arc::new);
    let connected = {
        let mut slot = lock(&slot);
        slot.connecting = None;
        match &connected {
            // The checks waiting for it may have given up (it took longer than they wait):
            // its reason (AUTH refused, a certificate not trusted...) is said here, once a
            // run of failures.
            Err(error) if !slot.failing => tracing::warn!(
                error = error.as_ref() as &dyn std::error::Error,
                "making a connection to Redis failed"
            ),
            _ => {}
        }
        slot.failing = connected.is_err();
        connected.map(|conn| {
            slot.made += 1;
            let kept = (slot.made, conn);
            slot.connection = Some(kept.clone());
            kept
        })
    };
    // Nobody may be waiting any more: the connection is kept all the same.
    let _ = tell.send(Some(connected));
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether a look at a bucket counts a request, only reads the count, or spends a cost.
#[derive(Clone, Copy)]
enum Look {
    Count,
    Peek,
    Spend(u32),
}

/// The Redis key of a bucket (each window appends `:<index>`). The hash tag keeps every
/// window of a bucket in one Redis Cluster slot.
fn bucket_key(bucket: &RateBucket) -> String {
    format!("posture:rl:{{{bucket}}}")
}

#[async_trait]
impl RateLimiter for RedisRateLimiter {
    async fn check(&self, bucket: &RateBucket) -> Result<RateDecision> {
        Ok(self.look(bucket, Look::Count).await)
    }

    async fn peek(&self, bucket: &RateBucket) -> Result<RateDecision> {
        Ok(self.look(bucket, Look::Peek).await)
    }

    async fn spend(&self, bucket: &RateBucket, cost: u32) -> Result<RateDecision> {
        Ok(self.look(bucket, Look::Spend(cost)).await)
    }

    fn state(&self) -> LimiterState {
        match self.health().degraded_since {
            None => LimiterState::Shared,
            Some(since) => LimiterState::Degraded {
                since_epoch_secs: since,
            },
        }
    }
}
