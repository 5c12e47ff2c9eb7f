//! Counters in this process: the limiter of a single instance without Redis, and the
//! fallback of the shared one while Redis is unreachable. Windows and decisions follow the
//! domain's [`RatePolicy`]; time comes from a [`Clock`].

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
};

use async_trait::async_trait;
use posture_domain::{
    Result,
    clock::Clock,
    rate_limit::{LimiterState, RateBucket, RateDecision, RateLimiter, RatePolicy},
};

/// Counters in this process. Each bucket's count belongs to its current window (windows have
/// a phase per bucket: [`RatePolicy::window_of`]); a count of a past window reads as zero
/// and is started afresh. Memory is bounded: at most [`InProcessRateLimiter::MAX_ADDRESSES`]
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
    /// Bucket → (its window's index, count, tick of its last use).
    counts: HashMap<RateBucket, (u64, u64, u64)>,
    /// Tick → bucket, oldest first.
    by_use: BTreeMap<u64, RateBucket>,
}

impl Lru {
    /// The count of `bucket` in its window `window`.
    fn get(&self, bucket: &RateBucket, window: u64) -> u64 {
        match self.counts.get(bucket) {
            Some((at, count, _)) if *at == window => *count,
            _ => 0,
        }
    }

    /// Adds one to `bucket` in its window `window` at `tick`, evicting the least recently
    /// used past `capacity`.
    fn increment(&mut self, bucket: &RateBucket, window: u64, tick: u64, capacity: usize) -> u64 {
        self.add(bucket, (window, tick, capacity), |count| count + 1)
    }

    /// Sets `bucket`'s count in its window `window` (zero when its count is of another
    /// window) to `next` of it, at `tick`, evicting the least recently used past `capacity`;
    /// returns the new count.
    fn add(
        &mut self,
        bucket: &RateBucket,
        (window, tick, capacity): (u64, u64, usize),
        next: impl FnOnce(u64) -> u64,
    ) -> u64 {
        let count = match self.counts.get_mut(bucket) {
            Some((at, count, last)) => {
                self.by_use.remove(last);
                *last = tick;
                if *at != window {
                    *at = window;
                    *count = 0;
                }
                *count = next(*count);
                *count
            }
            None => {
                while self.counts.len() >= capacity {
                    let Some((_, oldest)) = self.by_use.pop_first() else {
                        break;
                    };
                    self.counts.remove(&oldest);
                }
                let count = next(0);
                self.counts.insert(bucket.clone(), (window, count, tick));
                count
            }
        };
        self.by_use.insert(tick, bucket.clone());
        count
    }
}

#[derive(Default)]
struct Counters {
    tick: u64,
    keys: Lru,
    addresses: Lru,
}

impl InProcessRateLimiter {
    /// Address buckets kept per window.
    pub const MAX_ADDRESSES: usize = 100_000;
    /// Key buckets kept per window.
    pub const MAX_KEYS: usize = 100_000;

    /// A limiter whose windows run on `clock`.
    pub fn new(policy: RatePolicy, clock: Arc<dyn Clock>) -> Self {
        Self {
            policy,
            counters: Mutex::default(),
            clock,
        }
    }

    /// Epoch seconds on its clock.
    pub fn now(&self) -> u64 {
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
        let (window, reset_at) = self.policy.window_of(bucket, now);
        let mut counters = self.counters();
        counters.tick += 1;
        let tick = counters.tick;
        let (lru, capacity) = counters.of(bucket);
        let count = lru.increment(bucket, window, tick, capacity);
        self.policy.decide(count, reset_at, now)
    }

    /// Spends `cost` of `bucket` at `now` (epoch seconds), if all of it fits.
    pub fn spend_at(&self, bucket: &RateBucket, cost: u32, now: u64) -> RateDecision {
        let (window, reset_at) = self.policy.window_of(bucket, now);
        let limit = u64::from(self.policy.limit);
        let cost = u64::from(cost);
        let mut counters = self.counters();
        counters.tick += 1;
        let tick = counters.tick;
        let (lru, capacity) = counters.of(bucket);
        let mut before = 0;
        lru.add(bucket, (window, tick, capacity), |count| {
            before = count;
            if count.saturating_add(cost) <= limit {
                count + cost
            } else {
                count
            }
        });
        self.policy.spent(before, cost, reset_at, now)
    }

    /// The state of `bucket` at `now`, without counting a request.
    pub fn peek_at(&self, bucket: &RateBucket, now: u64) -> RateDecision {
        let (window, reset_at) = self.policy.window_of(bucket, now);
        let mut counters = self.counters();
        let count = counters.of(bucket).0.get(bucket, window);
        self.policy.peeked(count, reset_at, now)
    }
}

impl Counters {
    /// Where `bucket` is counted, and how many of its kind are kept: keys and customers are
    /// bounded by the data (known ids), addresses and the like by the least recently used
    /// going first.
    fn of(&mut self, bucket: &RateBucket) -> (&mut Lru, usize) {
        match bucket {
            RateBucket::Key(_)
            | RateBucket::Customer(_)
            | RateBucket::CustomerWebhookTests(_)
            | RateBucket::CustomerTriageWrites(_)
            | RateBucket::CustomerTriageBytes(_)
            | RateBucket::CustomerScimWrites(_)
            | RateBucket::ClientTokens(_) => (&mut self.keys, InProcessRateLimiter::MAX_KEYS),
            RateBucket::Address(_) | RateBucket::SignIn(_) | RateBucket::WebhookTest(_) => {
                (&mut self.addresses, InProcessRateLimiter::MAX_ADDRESSES)
            }
        }
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

    async fn spend(&self, bucket: &RateBucket, cost: u32) -> Result<RateDecision> {
        Ok(self.spend_at(bucket, cost, self.now()))
    }

    fn check_now(&self, bucket: &RateBucket) -> Option<RateDecision> {
        Some(self.check_at(bucket, self.now()))
    }

    fn peek_now(&self, bucket: &RateBucket) -> Option<RateDecision> {
        Some(self.peek_at(bucket, self.now()))
    }

    fn state(&self) -> LimiterState {
        LimiterState::InProcess
    }
}

#[cfg(test)]
mod tests {
    use posture_domain::KeyId;

    use super::*;

    const POLICY: RatePolicy = RatePolicy {
        limit: 3,
        window_secs: 60,
    };

    /// A limiter on a clock that stands still: every count made at once falls in one
    /// window.
    fn limiter() -> InProcessRateLimiter {
        let clock = Arc::new(posture_domain::clock::ManualClock::starting_now());
        InProcessRateLimiter::new(POLICY, clock)
    }

    /// The gate's allocation-free path counts in the same buckets as `check` and `peek`.
    #[tokio::test]
    async fn a_count_made_at_once_is_the_count_check_makes() {
        let limiter = limiter();
        let key = RateBucket::Key(KeyId::generate());
        let first = limiter.check_now(&key).expect("decided in process");
        assert_eq!(first.remaining, 2);
        assert_eq!(limiter.peek_now(&key).map(|d| d.remaining), Some(2));
        assert_eq!(limiter.check(&key).await.unwrap().remaining, 1);
        assert_eq!(limiter.check_now(&key).map(|d| d.remaining), Some(0));
        assert!(!limiter.peek(&key).await.unwrap().allowed);
        assert!(!limiter.check_now(&key).unwrap().allowed);
    }

    #[test]
    fn the_request_after_the_limit_is_refused_until_the_window_resets() {
        let limiter = limiter();
        let key = RateBucket::Key(KeyId::generate());
        // The first second of this key's window (its phase decides where windows start).
        let (_, start) = POLICY.window_of(&key, 1_000_000);
        let remaining: Vec<u32> = (0..3)
            .map(|_| limiter.check_at(&key, start).remaining)
            .collect();
        assert_eq!(remaining, vec![2, 1, 0]);
        let refused = limiter.check_at(&key, start + 10);
        assert!(!refused.allowed);
        assert_eq!(refused.retry_after, 50);
        assert_eq!(refused.reset_at, start + 60);
        assert!(
            !limiter.check_at(&key, start + 59).allowed,
            "refused to the window's last second"
        );
        assert!(
            limiter.check_at(&key, start + 60).allowed,
            "a new window starts afresh"
        );
    }

    #[test]
    fn buckets_count_independently() {
        let limiter = limiter();
        let a = RateBucket::Key(KeyId::generate());
        let b = RateBucket::Address("192.0.2.1".into());
        let (_, start) = POLICY.window_of(&a, 1_000_000);
        for _ in 0..3 {
            limiter.check_at(&a, start);
        }
        assert!(!limiter.check_at(&a, start).allowed);
        assert_eq!(limiter.check_at(&b, start).remaining, 2);
    }

    #[test]
    fn budget_is_read_without_counting() {
        let limiter = limiter();
        let address = RateBucket::Address("192.0.2.1".into());
        let (_, start) = POLICY.window_of(&address, 1_000_000);
        for _ in 0..3 {
            assert!(limiter.peek_at(&address, start).allowed);
            limiter.check_at(&address, start);
        }
        assert!(!limiter.peek_at(&address, start).allowed);
        assert!(
            limiter.peek_at(&address, start + 60).allowed,
            "a new window has budget"
        );
    }

    #[test]
    fn a_full_limiter_forgets_the_least_recently_used_address_never_a_key() {
        let limiter = limiter();
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
        let window = |b: &RateBucket| POLICY.window_of(b, 5).0;
        assert_eq!(
            counters.keys.get(&key, window(&key)),
            1,
            "the key bucket was kept"
        );
        assert_eq!(
            counters.addresses.get(&busy, window(&busy)),
            101,
            "the busy address was kept"
        );
        let a0 = RateBucket::Address("a0".into());
        assert!(
            !counters.addresses.counts.contains_key(&a0),
            "the least recently used address went"
        );
    }

    #[test]
    fn the_least_recently_used_address_goes_first() {
        let mut lru = Lru::default();
        let a = RateBucket::Address("a".into());
        let b = RateBucket::Address("b".into());
        let c = RateBucket::Address("c".into());
        lru.increment(&a, 0, 1, 2);
        lru.increment(&b, 0, 2, 2);
        lru.increment(&a, 0, 3, 2);
        lru.increment(&c, 0, 4, 2);
        assert_eq!(lru.get(&a, 0), 2, "used last but one: kept");
        assert_eq!(lru.get(&b, 0), 0, "least recently used: evicted");
        assert_eq!(lru.get(&c, 0), 1);
        assert_eq!(lru.by_use.len(), 2);
        // A count of a past window reads as zero and starts afresh.
        assert_eq!(lru.get(&a, 1), 0);
        assert_eq!(lru.increment(&a, 1, 5, 2), 1);
    }
}
