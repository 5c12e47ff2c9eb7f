//! Requests waiting on the events feed (`GET /events?wait=`, and streams of it): bounded per
//! key, per customer and per instance, woken by word of their customer's changed data (never by polling the
//! database), and let go at once when the server begins to shut down.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use posture_domain::{CustomerId, KeyId, ports::DataChanges};
use tokio::sync::watch;

use crate::error::ApiError;

/// Requests of one key waiting at once, at most (more: 429).
pub const MAX_WAITING_PER_KEY: usize = 4;
/// Requests of one customer's keys waiting at once on one instance, at most (more: 429): a
/// customer issuing keys cannot take the places of every other customer.
pub const MAX_WAITING_PER_CUSTOMER: usize = 32;
/// Requests waiting at once on one instance, at most by default (more: 503).
pub const DEFAULT_MAX_WAITING: usize = 1000;
/// How long a stream (`Accept: text/event-stream`) lasts by default before it ends and its
/// client reconnects with `Last-Event-ID` (`POSTURE_EVENT_STREAM_SECS`).
pub const DEFAULT_STREAM_FOR: std::time::Duration = std::time::Duration::from_secs(600);
/// A quiet stream sends a comment after this long without a message, so that proxies and
/// clients see it alive (and a reader that left is noticed).
pub const DEFAULT_HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(15);
/// How long a stream's message may wait for its reader before the stream ends: a reader that
/// stops reading holds neither a place nor more than one message of memory.
pub const DEFAULT_SLOW_READER: std::time::Duration = std::time::Duration::from_secs(30);

/// What waiting requests share.
#[derive(Clone)]
pub struct EventWaits {
    pub changes: Arc<dyn DataChanges>,
    /// The reads woken requests share.
    pub reads: crate::shared_reads::SharedReads,
    /// Longest a request waits (its `wait` is clamped to it).
    max_wait: std::time::Duration,
    /// Longest a stream lasts.
    stream_for: std::time::Duration,
    /// A quiet stream sends a comment after this long without a message.
    heartbeat: std::time::Duration,
    /// A stream whose reader takes longer than this to accept a message ends.
    slow_reader: std::time::Duration,
    slots: Arc<Slots>,
    stopping: Arc<watch::Sender<bool>>,
}

struct Slots {
    max: usize,
    waiting: Mutex<Waiting>,
}

/// The places taken, by key and by customer.
#[derive(Default)]
struct Waiting {
    total: usize,
    of_key: HashMap<KeyId, usize>,
    of_customer: HashMap<CustomerId, usize>,
}

/// One fewer under `at`, forgetting it at zero.
fn give_back<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, at: &K) {
    if let Some(n) = counts.get_mut(at) {
        *n -= 1;
        if *n == 0 {
            counts.remove(at);
        }
    }
}

/// A waiting request's place; given back when dropped.
pub struct WaitSlot {
    slots: Arc<Slots>,
    key: KeyId,
    customer: CustomerId,
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        let mut waiting = self.slots.lock();
        give_back(&mut waiting.of_key, &self.key);
        give_back(&mut waiting.of_customer, &self.customer);
        waiting.total -= 1;
        publish(&waiting);
    }
}

/// `posture_event_waiters`: the requests of this instance waiting for events now.
fn publish(waiting: &Waiting) {
    metrics::gauge!("posture_event_waiters").set(waiting.total as f64);
}

impl Slots {
    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl EventWaits {
    /// At most `max` requests waiting at once on this instance.
    pub fn new(changes: Arc<dyn DataChanges>, max: usize) -> Self {
        Self {
            changes,
            reads: crate::shared_reads::SharedReads::default(),
            max_wait: posture_domain::event::MAX_WAIT,
            stream_for: DEFAULT_STREAM_FOR,
            heartbeat: DEFAULT_HEARTBEAT,
            slow_reader: DEFAULT_SLOW_READER,
            slots: Arc::new(Slots {
                max,
                waiting: Mutex::default(),
            }),
            stopping: Arc::new(watch::channel(false).0),
        }
    }

    /// Waiting at most `max_wait` (`POSTURE_EVENT_MAX_WAIT_SECS`, below the contract's 30 s).
    pub fn with_max_wait(mut self, max_wait: std::time::Duration) -> Self {
        self.max_wait = max_wait.min(posture_domain::event::MAX_WAIT);
        self
    }

    /// Streams last at most `stream_for` (`POSTURE_EVENT_STREAM_SECS`).
    pub fn with_stream_for(mut self, stream_for: std::time::Duration) -> Self {
        self.stream_for = stream_for;
        self
    }

    /// How long a stream lasts at most.
    pub fn stream_for(&self) -> std::time::Duration {
        self.stream_for
    }

    /// Quiet streams send a comment every `heartbeat` (tests shorten it).
    pub fn with_heartbeat(mut self, heartbeat: std::time::Duration) -> Self {
        self.heartbeat = heartbeat;
        self
    }

    /// How long a stream stays quiet before it sends a comment.
    pub fn heartbeat(&self) -> std::time::Duration {
        self.heartbeat
    }

    /// Streams whose reader takes longer than `slow_reader` to accept a message end (tests
    /// shorten it).
    pub fn with_slow_reader(mut self, slow_reader: std::time::Duration) -> Self {
        self.slow_reader = slow_reader;
        self
    }

    /// How long a message may wait for its reader before the stream gives up on it.
    pub fn slow_reader(&self) -> std::time::Duration {
        self.slow_reader
    }

    /// How long a request asking `wait` waits at most.
    pub fn wait_for(&self, wait: std::time::Duration) -> std::time::Duration {
        wait.min(self.max_wait)
    }

    /// A place for a request of `key` (of `customer`) to wait, or why there is none: the key
    /// has [`MAX_WAITING_PER_KEY`] waiting already, or its customer
    /// [`MAX_WAITING_PER_CUSTOMER`] (429), or the instance its maximum (503).
    pub fn take(&self, key: KeyId, customer: CustomerId) -> Result<WaitSlot, ApiError> {
        let mut waiting = self.slots.lock();
        if waiting.of_key.get(&key).copied().unwrap_or(0) >= MAX_WAITING_PER_KEY {
            return Err(ApiError::OperationLimited {
                what: "this key has 4 requests waiting for events (or streams of them) already",
                retry_after: 1,
            });
        }
        if waiting.of_customer.get(&customer).copied().unwrap_or(0) >= MAX_WAITING_PER_CUSTOMER {
            return Err(ApiError::OperationLimited {
                what: "your keys have 32 requests waiting for events (or streams of them) on \
                       this instance already",
                retry_after: 1,
            });
        }
        if waiting.total >= self.slots.max {
            return Err(ApiError::Busy("every place for a waiting request is taken"));
        }
        *waiting.of_key.entry(key).or_insert(0) += 1;
        *waiting.of_customer.entry(customer).or_insert(0) += 1;
        waiting.total += 1;
        publish(&waiting);
        Ok(WaitSlot {
            slots: Arc::clone(&self.slots),
            key,
            customer,
        })
    }

    /// Requests waiting now.
    pub fn waiting(&self) -> usize {
        self.slots.lock().total
    }

    /// The server is shutting down: every waiting request answers now (with what it has),
    /// and new ones do not wait.
    pub fn stop_waiting(&self) {
        self.stopping.send_replace(true);
    }

    /// Resolves when the server begins to shut down.
    pub async fn stopped(&self) {
        let mut stopping = self.stopping.subscribe();
        // The sender lives as long as `self`: `wait_for` ends only when it says so.
        let _ = stopping.wait_for(|stop| *stop).await;
    }

    /// Whether the server is shutting down.
    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoChanges;

    impl DataChanges for NoChanges {
        fn subscribe(
            &self,
            _: posture_domain::CustomerId,
        ) -> Box<dyn posture_domain::ports::DataChangeSubscription> {
            unreachable!("not waited on here")
        }
    }

    #[test]
    fn places_are_bounded_per_key_and_per_instance_and_given_back() {
        let waits = EventWaits::new(Arc::new(NoChanges), 6);
        let (a, b) = (KeyId::generate(), KeyId::generate());
        let (ca, cb) = (CustomerId::generate(), CustomerId::generate());
        let of_a: Vec<WaitSlot> = (0..MAX_WAITING_PER_KEY)
            .map(|_| waits.take(a, ca).unwrap())
            .collect();
        assert!(matches!(
            waits.take(a, ca),
            Err(ApiError::OperationLimited { retry_after: 1, .. })
        ));
        let of_b: Vec<WaitSlot> = (0..2).map(|_| waits.take(b, cb).unwrap()).collect();
        assert!(
            matches!(waits.take(b, cb), Err(ApiError::Busy(_))),
            "the instance is full"
        );
        assert_eq!(waits.waiting(), 6);
        drop(of_a);
        assert_eq!(waits.waiting(), 2);
        assert!(waits.take(b, cb).is_ok(), "places come back");
        drop(of_b);
        assert_eq!(waits.waiting(), 0);
    }

    #[test]
    fn one_customers_keys_cannot_take_every_place_of_the_instance() {
        let waits = EventWaits::new(Arc::new(NoChanges), 1000);
        let (greedy, other) = (CustomerId::generate(), CustomerId::generate());
        let keys: Vec<KeyId> = (0..MAX_WAITING_PER_CUSTOMER / MAX_WAITING_PER_KEY + 1)
            .map(|_| KeyId::generate())
            .collect();
        let mut held = Vec::new();
        for key in &keys[..keys.len() - 1] {
            for _ in 0..MAX_WAITING_PER_KEY {
                held.push(waits.take(*key, greedy).unwrap());
            }
        }
        assert_eq!(waits.waiting(), MAX_WAITING_PER_CUSTOMER);
        let refused = waits.take(keys[keys.len() - 1], greedy).err().unwrap();
        assert!(
            matches!(refused, ApiError::OperationLimited { retry_after: 1, what }
                if what.contains("your keys have 32")),
            "a new key of the same customer waits no more"
        );
        assert!(
            waits.take(KeyId::generate(), other).is_ok(),
            "others still wait"
        );
        held.pop();
        assert!(
            waits.take(keys[keys.len() - 1], greedy).is_ok(),
            "a place came back"
        );
    }

    #[test]
    fn a_wait_is_clamped_to_the_instances_longest() {
        use std::time::Duration;
        let waits = EventWaits::new(Arc::new(NoChanges), 6);
        assert_eq!(
            waits.wait_for(Duration::from_secs(99)),
            Duration::from_secs(30)
        );
        let short = waits.with_max_wait(Duration::from_secs(1));
        assert_eq!(
            short.wait_for(Duration::from_secs(20)),
            Duration::from_secs(1)
        );
        assert_eq!(short.wait_for(Duration::ZERO), Duration::ZERO);
        let long = EventWaits::new(Arc::new(NoChanges), 6).with_max_wait(Duration::from_secs(90));
        assert_eq!(
            long.wait_for(Duration::from_secs(60)),
            Duration::from_secs(30)
        );
    }

    #[tokio::test]
    async fn stopping_lets_every_waiter_go() {
        let waits = EventWaits::new(Arc::new(NoChanges), 6);
        assert!(!waits.is_stopping());
        let waiter = tokio::spawn({
            let waits = waits.clone();
            async move { waits.stopped().await }
        });
        waits.stop_waiting();
        waiter.await.unwrap();
        assert!(waits.is_stopping());
        waits.stopped().await;
    }
}
