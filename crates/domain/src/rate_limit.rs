//! Rate limiting: a fixed window per bucket (an API key, or a client address for requests
//! without a valid key), each bucket's windows starting at a phase of its own.
//!
//! Window `n` of a bucket whose phase is `p` covers `[n * window - p, (n + 1) * window - p)`
//! in epoch seconds; its reset time is `(n + 1) * window - p`. The phase (`0 <= p < window`)
//! comes from a hash of the bucket's name, so every instance agrees on it without sharing
//! anything, and the keys told `Retry-After` do not all come back in the same second. Every request counts (429s included). The limiters are
//! adapters of `posture-rate-limit`: counters shared between instances in Redis, and counters in
//! this process (one instance, or the fallback while Redis is unreachable).

use std::fmt;

use async_trait::async_trait;

use crate::{
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

    /// The index of the window containing `now` (epoch seconds) and its reset time, for
    /// windows starting at multiples of the window length (phase 0).
    pub fn window(&self, now: u64) -> (u64, u64) {
        let window = u64::from(self.window_secs.max(1));
        let index = now / window;
        (index, (index + 1) * window)
    }

    /// Where `bucket`'s windows start, in seconds after the multiples of the window length:
    /// from SHA-256 of its name, so the same on every instance and spread evenly.
    pub fn phase(&self, bucket: &RateBucket) -> u64 {
        use sha2::Digest as _;
        /// The name written straight into the hash: no string per check (a request makes
        /// two or three).
        struct Hashing(sha2::Sha256);
        impl fmt::Write for Hashing {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                self.0.update(s.as_bytes());
                Ok(())
            }
        }
        let mut hashing = Hashing(sha2::Sha256::new());
        // Writing into a hash cannot fail.
        let _ = fmt::Write::write_fmt(&mut hashing, format_args!("{bucket}"));
        let digest = hashing.0.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_be_bytes(first) % u64::from(self.window_secs.max(1))
    }

    /// The index of `bucket`'s window containing `now` (epoch seconds) and its reset time.
    pub fn window_of(&self, bucket: &RateBucket, now: u64) -> (u64, u64) {
        let phase = self.phase(bucket);
        let (index, reset) = self.window(now + phase);
        (index, reset - phase)
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

    /// The decision on spending `cost` of a window holding `count` (before it), resetting
    /// at `reset_at`: allowed when the whole cost fits, and then `count + cost` is the
    /// window's; refused otherwise, the window left as it was (a refused spend costs
    /// nothing: it did nothing).
    pub fn spent(&self, count: u64, cost: u64, reset_at: u64, now: u64) -> RateDecision {
        let allowed = count.saturating_add(cost) <= u64::from(self.limit);
        let after = if allowed { count + cost } else { count };
        RateDecision {
            allowed,
            ..self.decide(after, reset_at, now)
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
    /// Triage writes of a customer's keys together (a bulk counts once).
    CustomerTriageWrites(CustomerId),
    /// What a customer's triage writes add to storage, in bytes (`triage::stored_cost`).
    CustomerTriageBytes(CustomerId),
    /// SCIM writes of a customer's provisioning keys together.
    CustomerScimWrites(CustomerId),
    /// Token requests of an OAuth client (`POST /oauth/token`), by its id.
    ClientTokens(KeyId),
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
            RateBucket::CustomerTriageWrites(_) => "triage-writes-per-customer",
            RateBucket::CustomerTriageBytes(_) => "triage-bytes-per-customer",
            RateBucket::CustomerScimWrites(_) => "scim-writes-per-customer",
            RateBucket::ClientTokens(_) => "tokens-per-client",
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
            RateBucket::CustomerTriageWrites(id) => write!(f, "triage-writes-of:{id}"),
            RateBucket::CustomerTriageBytes(id) => write!(f, "triage-bytes-of:{id}"),
            RateBucket::CustomerScimWrites(id) => write!(f, "scim-writes-of:{id}"),
            RateBucket::ClientTokens(id) => write!(f, "tokens-of:{id}"),
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
    /// Spends `cost` of `bucket`'s window when all of it fits ([`RatePolicy::spent`]): a
    /// budget counted in units other than requests (bytes). A refused spend costs nothing.
    async fn spend(&self, bucket: &RateBucket, cost: u32) -> Result<RateDecision>;
    /// [`RateLimiter::check`] at once, for a limiter that decides without waiting (one
    /// in process); `None`: call `check`. The gate asks this first on every request: the
    /// future of a trait object's `async fn` is boxed, an allocation a count made in
    /// process does not need.
    fn check_now(&self, _bucket: &RateBucket) -> Option<RateDecision> {
        None
    }
    /// [`RateLimiter::peek`] at once, as [`RateLimiter::check_now`] is `check`.
    fn peek_now(&self, _bucket: &RateBucket) -> Option<RateDecision> {
        None
    }
    /// The limiter's current state.
    fn state(&self) -> LimiterState;
}

/// What a customer holds a place for while a request lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PlaceKind {
    /// A request waiting on the events feed (`wait=`), or a stream of it.
    Waiting,
    /// An export streaming.
    Export,
}

impl PlaceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PlaceKind::Waiting => "waiting",
            PlaceKind::Export => "export",
        }
    }
}

/// A place of a customer, held by one request (`holder`: unique to it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Place {
    pub kind: PlaceKind,
    pub customer: CustomerId,
    pub holder: uuid::Uuid,
}

impl Place {
    /// A new place of `kind` for a request of `customer`.
    pub fn new(kind: PlaceKind, customer: CustomerId) -> Self {
        Self {
            kind,
            customer,
            holder: uuid::Uuid::new_v4(),
        }
    }
}

/// Places a customer holds at once, counted over every instance when they share a counter
/// (Redis), in this process otherwise. A place is held on a lease ([`PLACE_LEASE`]) its
/// holder renews while its request lasts ([`Places::keep`]): an instance that dies gives its
/// places back when their leases end.
#[async_trait]
pub trait Places: Send + Sync {
    /// Takes `place` if its customer holds fewer than `limit` of its kind: `false` if not.
    async fn take(&self, place: &Place, limit: u32) -> Result<bool>;
    /// Renews `place`'s lease.
    async fn keep(&self, place: &Place) -> Result<()>;
    /// Gives `place` back.
    async fn give_back(&self, place: &Place) -> Result<()>;
    /// Gives `place` back at once when that needs no I/O (counted in this process): `true`
    /// if it is given back, `false` if [`Places::give_back`] must do it.
    fn give_back_now(&self, _place: &Place) -> bool {
        false
    }
    /// The counter's current state.
    fn state(&self) -> LimiterState;
}

/// How long a place is held without its holder renewing it.
pub const PLACE_LEASE: std::time::Duration = std::time::Duration::from_secs(60);

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
    fn each_bucket_has_windows_of_its_own_phase_the_same_everywhere() {
        let policy = RatePolicy {
            limit: 3,
            window_secs: 900,
        };
        let buckets: Vec<RateBucket> = (0..1000)
            .map(|i| RateBucket::Address(format!("192.0.2.{i}")))
            .collect();
        let phases: Vec<u64> = buckets.iter().map(|b| policy.phase(b)).collect();
        assert!(phases.iter().all(|&p| p < 900));
        // Spread: 1,000 buckets over 900 seconds; no second holds more than a handful.
        let mut per_second = [0u32; 900];
        for &p in &phases {
            per_second[p as usize] += 1;
        }
        assert!(
            per_second.iter().max().copied().unwrap_or(0) <= 8,
            "{per_second:?}"
        );
        // Deterministic (every instance computes the same), and a window is window long.
        let b = &buckets[7];
        assert_eq!(policy.phase(b), policy.phase(&b.clone()));
        let now = 1_800_000_000;
        let (index, reset) = policy.window_of(b, now);
        assert!(reset > now && reset <= now + 900);
        assert_eq!(policy.window_of(b, reset - 1), (index, reset));
        assert_eq!(policy.window_of(b, reset), (index + 1, reset + 900));
    }

    #[test]
    fn the_phase_is_the_hash_of_the_bucket_name() {
        use sha2::Digest as _;
        let bucket = RateBucket::Address("192.0.2.7".into());
        let digest = sha2::Sha256::digest(b"ip:192.0.2.7");
        let first = u64::from_be_bytes(digest[..8].try_into().unwrap());
        assert_eq!(POLICY.phase(&bucket), first % 60);
    }

    #[test]
    fn a_spend_that_does_not_fit_is_refused_and_costs_nothing() {
        let budget = RatePolicy {
            limit: 100,
            window_secs: 60,
        };
        let fits = budget.spent(40, 60, 60, 10);
        assert!(fits.allowed);
        assert_eq!(fits.remaining, 0);
        let over = budget.spent(40, 61, 60, 10);
        assert!(!over.allowed);
        assert_eq!(over.remaining, 60, "the window is as it was");
        assert_eq!(over.retry_after, 50);
        assert!(!budget.spent(u64::MAX, 1, 60, 10).allowed);
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
