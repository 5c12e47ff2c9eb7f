//! Rate limiting: a fixed window per bucket (an API key, or a client address for requests
//! without a valid key).
//!
//! Window `n` of a policy covers `[n * window, (n + 1) * window)` in epoch seconds; its
//! reset time is `(n + 1) * window`. Every request counts (429s included). The
//! [`InProcessRateLimiter`] keeps counters in this process (one instance, or the fallback
//! while Redis is unreachable); `posture-redis` shares them between instances.

use std::{
    collections::{BTreeMap, HashMap},
    fmt,
    sync::{Arc, Mutex},
    time::{SystemTime, UNIX_EPOCH},
};

use async_trait::async_trait;

use crate::{
    clock::Clock,
    error::Result,
    ids::{CustomerId, KeyId, WebhookId},
};

/// Requests allowed per window, and the window's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RatePolicy {
    pub limit: u32,
    pub window_secs: u32,
}

impl RatePolicy {
    /// 1,000 requests per key per 15 minutes (docs/api.md, "Rate limits").
    pub const DEFAULT: RatePolicy = RatePolicy {
        limit: 1000,
        window_secs: 900,
    };

    /// The index of the window containing `now` (epoch seconds) and its reset time.
    pub fn window(&self, now: u64) -> (u64, u64) {
        let window = u64::from(self.window_secs.max(1));
        let index = now / window;
        (index, (index + 1) * window)
    }

    /// The decision for the `count`-th request of a window resetting at `reset_at`.
    pub fn decide(&self, count: u64, reset_at: u64, now: u64) -> RateDecision {
        let limit = u64::from(self.limit);
        RateDecision {
            limit: self.limit,
            remaining: limit.saturating_sub(count) as u32,
            reset_at,
            retry_after: reset_at.saturating_sub(now).max(1),
            window_secs: self.window_secs,
            allowed: count <= limit,
        }
    }

    /// The state of a window holding `count` requests, without counting one: `allowed`
    /// says whether one more would be.
    pub fn peeked(&self, count: u64, reset_at: u64, now: u64) -> RateDecision {
        RateDecision {
            allowed: count < u64::from(self.limit),
            ..self.decide(count, reset_at, now)
        }
    }
}

/// Whose requests a counter counts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RateBucket {
    /// An authenticated key (by its public id, never the key).
    Key(KeyId),
    /// A client address (IPv6 addresses by their /64), for requests without a valid key.
    Address(String),
    /// Console sign-ins from a client address (bucket name as for `Address`), counted
    /// apart from API requests.
    SignIn(String),
    /// Test deliveries of a webhook subscription (`POST /webhooks/{id}/test`).
    WebhookTest(WebhookId),
    /// Every request of a customer's keys together (besides each key's own bucket): issuing
    /// more keys does not multiply what a customer may ask.
    Customer(CustomerId),
    /// Test deliveries of all of a customer's subscriptions together (deleting and creating
    /// subscriptions does not multiply them).
    CustomerWebhookTests(CustomerId),
}

impl RateBucket {
    /// The policy name in `RateLimit-Policy`.
    pub fn policy_name(&self) -> &'static str {
        match self {
            RateBucket::Key(_) => "per-key",
            RateBucket::Address(_) => "per-address",
            RateBucket::SignIn(_) => "sign-in",
            RateBucket::WebhookTest(_) => "webhook-test",
            RateBucket::Customer(_) => "per-customer",
            RateBucket::CustomerWebhookTests(_) => "webhook-test-per-customer",
        }
    }
}

impl fmt::Display for RateBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateBucket::Key(id) => write!(f, "key:{id}"),
            RateBucket::Address(address) => write!(f, "ip:{address}"),
            RateBucket::SignIn(address) => write!(f, "signin:{address}"),
            RateBucket::WebhookTest(id) => write!(f, "webhook-test:{id}"),
            RateBucket::Customer(id) => write!(f, "customer:{id}"),
            RateBucket::CustomerWebhookTests(id) => write!(f, "webhook-tests-of:{id}"),
        }
    }
}

/// The outcome of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateDecision {
    pub limit: u32,
    pub remaining: u32,
    /// Epoch seconds at which the window ends.
    pub reset_at: u64,
    /// Seconds until then, at least 1.
    pub retry_after: u64,
    pub window_secs: u32,
    pub allowed: bool,
}

/// Which limiter answered, for readiness and logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LimiterState {
    /// Counters in this process only.
    InProcess,
    /// Counters shared through Redis.
    Shared,
    /// Redis is configured but unreachable: counting in this process until it is back.
    Degraded { since_epoch_secs: u64 },
}

/// Counts requests per bucket.
#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// Counts one request of `bucket` and decides on it.
    async fn check(&self, bucket: &RateBucket) -> Result<RateDecision>;
    /// The state of `bucket`'s current window without counting a request: the gate asks
    /// before paying for a key lookup (`allowed`: a request is left), and answers a
    /// conditional request that matched (304, which costs no quota) with its headers.
    async fn peek(&self, bucket: &RateBucket) -> Result<RateDecision>;
    /// The limiter's current state.
    fn state(&self) -> LimiterState;
}

/// Epoch seconds now.
pub fn epoch_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Counters in this process. Memory is bounded: entries of past windows are dropped when a
/// new window starts; within a window at most [`InProcessRateLimiter::MAX_ADDRESSES`]
/// address buckets are kept, the least recently used going first (an address that comes
/// back starts from zero), and key buckets are never dropped to make room for addresses
/// (there are only as many as valid keys; past [`InProcessRateLimiter::MAX_KEYS`] the least
/// recently used key bucket goes).
pub struct InProcessRateLimiter {
    policy: RatePolicy,
    counters: Mutex<Counters>,
    /// Where its windows' time comes from (the system's, or a test's).
    clock: Arc<dyn Clock>,
}

/// Counts per bucket with least-recently-used eviction.
#[derive(Default)]
struct Lru {
    /// Bucket → (count, tick of its last use).
    counts: HashMap<RateBucket, (u64, u64)>,
    /// Tick → bucket, oldest first.
    by_use: BTreeMap<u64, RateBucket>,
}

impl Lru {
    fn get(&self, bucket: &RateBucket) -> u64 {
        self.counts.get(bucket).map_or(0, |(count, _)| *count)
    }

    /// Adds one to `bucket` at `tick`, evicting the least recently used past `capacity`.
    fn increment(&mut self, bucket: &RateBucket, tick: u64, capacity: usize) -> u64 {
        let count = match self.counts.get_mut(bucket) {
            Some((count, last)) => {
                self.by_use.remove(last);
                *last = tick;
                *count += 1;
                *count
            }
            None => {
                while self.counts.len() >= capacity {
                    let Some((_, oldest)) = self.by_use.pop_first() else {
                        break;
                    };
                    self.counts.remove(&oldest);
                }
                self.counts.insert(bucket.clone(), (1, tick));
                1
            }
        };
        self.by_use.insert(tick, bucket.clone());
        count
    }

    fn clear(&mut self) {
        self.counts.clear();
        self.by_use.clear();
    }
}

#[derive(Default)]
struct Counters {
    window: u64,
    tick: u64,
    keys: Lru,
    addresses: Lru,
}

impl Counters {
    /// Starts window `window` afresh if it is a new one.
    fn enter(&mut self, window: u64) {
        if self.window != window {
            self.window = window;
            self.keys.clear();
            self.addresses.clear();
        }
    }
}

impl InProcessRateLimiter {
    /// Address buckets kept per window.
    pub const MAX_ADDRESSES: usize = 100_000;
    /// Key buckets kept per window.
    pub const MAX_KEYS: usize = 100_000;

    pub fn new(policy: RatePolicy) -> Self {
        Self::with_clock(policy, crate::clock::system())
    }

    /// A limiter whose windows run on `clock`.
    pub fn with_clock(policy: RatePolicy, clock: Arc<dyn Clock>) -> Self {
        Self {
            policy,
            counters: Mutex::default(),
            clock,
        }
    }

    /// Epoch seconds on its clock.
    fn now(&self) -> u64 {
        u64::try_from(self.clock.now().timestamp()).unwrap_or(0)
    }

    pub fn policy(&self) -> RatePolicy {
        self.policy
    }

    fn counters(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.counters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts one request of `bucket` at `now` (epoch seconds).
    pub fn check_at(&self, bucket: &RateBucket, now: u64) -> RateDecision {
        let (window, reset_at) = self.policy.window(now);
        let mut counters = self.counters();
        counters.enter(window);
        counters.tick += 1;
        let tick = counters.tick;
        // Keys and customers are bounded by the data (known ids), addresses and the like
        // by the least recently used going first.
        let count = match bucket {
            RateBucket::Key(_) | RateBucket::Customer(_) | RateBucket::CustomerWebhookTests(_) => {
                counters.keys.increment(bucket, tick, Self::MAX_KEYS)
            }
            RateBucket::Address(_) | RateBucket::SignIn(_) | RateBucket::WebhookTest(_) => counters
                .addresses
                .increment(bucket, tick, Self::MAX_ADDRESSES),
        };
        self.policy.decide(count, reset_at, now)
    }

    /// The state of `bucket` at `now`, without counting a request.
    pub fn peek_at(&self, bucket: &RateBucket, now: u64) -> RateDecision {
        let (window, reset_at) = self.policy.window(now);
        let mut counters = self.counters();
        counters.enter(window);
        let count = match bucket {
            RateBucket::Key(_) | RateBucket::Customer(_) | RateBucket::CustomerWebhookTests(_) => {
                counters.keys.get(bucket)
            }
            RateBucket::Address(_) | RateBucket::SignIn(_) | RateBucket::WebhookTest(_) => {
                counters.addresses.get(bucket)
            }
        };
        self.policy.peeked(count, reset_at, now)
    }
}

#[async_trait]
impl RateLimiter for InProcessRateLimiter {
    async fn check(&self, bucket: &RateBucket) -> Result<RateDecision> {
        Ok(self.check_at(bucket, self.now()))
    }

    async fn peek(&self, bucket: &RateBucket) -> Result<RateDecision> {
        Ok(self.peek_at(bucket, self.now()))
    }

    fn state(&self) -> LimiterState {
        LimiterState::InProcess
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RatePolicy = RatePolicy {
        limit: 3,
        window_secs: 60,
    };

    #[test]
    fn windows_are_fixed_and_reset_at_their_end() {
        assert_eq!(POLICY.window(0), (0, 60));
        assert_eq!(POLICY.window(59), (0, 60));
        assert_eq!(POLICY.window(60), (1, 120));
    }

    #[test]
    fn the_request_after_the_limit_is_refused_until_the_window_resets() {
        let limiter = InProcessRateLimiter::new(POLICY);
        let key = RateBucket::Key(KeyId::generate());
        let remaining: Vec<u32> = (0..3)
            .map(|_| limiter.check_at(&key, 10).remaining)
            .collect();
        assert_eq!(remaining, vec![2, 1, 0]);
        let refused = limiter.check_at(&key, 10);
        assert!(!refused.allowed);
        assert_eq!(refused.retry_after, 50);
        assert_eq!(refused.reset_at, 60);
        assert!(
            limiter.check_at(&key, 60).allowed,
            "a new window starts afresh"
        );
    }

    #[test]
    fn buckets_count_independently() {
        let limiter = InProcessRateLimiter::new(POLICY);
        let a = RateBucket::Key(KeyId::generate());
        let b = RateBucket::Address("192.0.2.1".into());
        for _ in 0..3 {
            limiter.check_at(&a, 5);
        }
        assert!(!limiter.check_at(&a, 5).allowed);
        assert_eq!(limiter.check_at(&b, 5).remaining, 2);
    }

    #[test]
    fn budget_is_read_without_counting() {
        let limiter = InProcessRateLimiter::new(POLICY);
        let address = RateBucket::Address("192.0.2.1".into());
        for _ in 0..3 {
            assert!(limiter.peek_at(&address, 5).allowed);
            limiter.check_at(&address, 5);
        }
        assert!(!limiter.peek_at(&address, 5).allowed);
        assert!(
            limiter.peek_at(&address, 60).allowed,
            "a new window has budget"
        );
    }

    #[test]
    fn a_full_limiter_forgets_the_least_recently_used_address_never_a_key() {
        let limiter = InProcessRateLimiter::new(POLICY);
        let key = RateBucket::Key(KeyId::generate());
        let busy = RateBucket::Address("192.0.2.1".into());
        limiter.check_at(&key, 5);
        for i in 0..InProcessRateLimiter::MAX_ADDRESSES + 10 {
            if i % 1000 == 0 {
                // The busy address stays recently used, so it is never the one evicted.
                limiter.check_at(&busy, 5);
            }
            limiter.check_at(&RateBucket::Address(format!("a{i}")), 5);
        }
        let counters = limiter.counters();
        assert_eq!(
            counters.addresses.counts.len(),
            InProcessRateLimiter::MAX_ADDRESSES
        );
        assert_eq!(counters.keys.get(&key), 1, "the key bucket was kept");
        assert_eq!(
            counters.addresses.get(&busy),
            101,
            "the busy address was kept"
        );
        assert_eq!(
            counters.addresses.get(&RateBucket::Address("a0".into())),
            0,
            "the least recently used address went"
        );
    }

    #[test]
    fn the_least_recently_used_address_goes_first() {
        let mut lru = Lru::default();
        let a = RateBucket::Address("a".into());
        let b = RateBucket::Address("b".into());
        let c = RateBucket::Address("c".into());
        lru.increment(&a, 1, 2);
        lru.increment(&b, 2, 2);
        lru.increment(&a, 3, 2);
        lru.increment(&c, 4, 2);
        assert_eq!(lru.get(&a), 2, "used last but one: kept");
        assert_eq!(lru.get(&b), 0, "least recently used: evicted");
        assert_eq!(lru.get(&c), 1);
        assert_eq!(lru.by_use.len(), 2);
    }

    #[test]
    fn retry_after_is_at_least_one_second() {
        assert_eq!(POLICY.decide(4, 60, 60).retry_after, 1);
    }

    #[test]
    fn buckets_are_named_by_key_id_or_address_never_the_key() {
        let id = KeyId::generate();
        assert_eq!(RateBucket::Key(id).to_string(), format!("key:{id}"));
        assert_eq!(
            RateBucket::Address("2001:db8::/64".into()).to_string(),
            "ip:2001:db8::/64"
        );
    }
}
