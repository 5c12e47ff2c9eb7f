//! Requests waiting on the events feed (`GET /events?wait=`, and streams of it): bounded per
//! key and per instance, and per customer over every instance (the customer's places,
//! `crate::places`, shared through Redis when it is configured); woken by word of their
//! customer's changed data (never by polling the database), and let go at once when the
//! server begins to shut down.
//!
//! An instance keeps a reserve of its places (a tenth) for customers holding almost none
//! of them: once it is that full, a customer already holding [`RESERVED_PER_CUSTOMER`]
//! places here waits no more here, so a customer arriving at a busy instance still gets a
//! place however many others fill it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use posture_domain::{
    CustomerId, KeyId,
    ports::DataChanges,
    rate_limit::{PlaceKind, Places},
};
use tokio::sync::watch;

use crate::{error::ApiError, places::HeldPlace};

/// Requests of one key waiting at once, at most (more: 429).
pub const MAX_WAITING_PER_KEY: usize = 4;
/// Requests of one customer's keys waiting at once, over every instance when they share
/// places (more: 429): a customer issuing keys cannot take the places of every other
/// customer.
pub const MAX_WAITING_PER_CUSTOMER: usize = 32;
/// How long a request waits for one of its customer's places before it is refused: a
/// place given back by a request that has just answered may be on its way back.
const PLACE_PATIENCE: std::time::Duration = std::time::Duration::from_millis(250);
/// Places a customer may still take of an instance's reserve (the last tenth of its
/// places).
pub const RESERVED_PER_CUSTOMER: usize = 2;
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
    /// The customers' places over every instance.
    places: Arc<dyn Places>,
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

/// A waiting request's place: on this instance, and of its customer over every instance;
/// given back when dropped.
pub struct WaitSlot {
    _local: LocalSlot,
    _place: HeldPlace,
}

/// A waiting request's place on this instance.
struct LocalSlot {
    slots: Arc<Slots>,
    key: KeyId,
    customer: CustomerId,
}

impl Drop for LocalSlot {
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
    /// At most `max` requests waiting at once on this instance; each customer's counted in
    /// `places`.
    pub fn new(changes: Arc<dyn DataChanges>, max: usize, places: Arc<dyn Places>) -> Self {
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
            places,
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
    /// has [`MAX_WAITING_PER_KEY`] waiting already on this instance, or its customer
    /// [`MAX_WAITING_PER_CUSTOMER`] over every instance (429), or the instance is full (503),
    /// or all but its reserve is taken and the customer holds [`RESERVED_PER_CUSTOMER`]
    /// places of it already (503).
    pub async fn take(&self, key: KeyId, customer: CustomerId) -> Result<WaitSlot, ApiError> {
        let local = self.take_here(key, customer)?;
        let limit = u32::try_from(MAX_WAITING_PER_CUSTOMER).unwrap_or(u32::MAX);
        let place = HeldPlace::take(
            &self.places,
            (PlaceKind::Waiting, customer),
            limit,
            PLACE_PATIENCE,
        )
        .await?
        .ok_or(ApiError::OperationLimited {
            what: "your keys have 32 requests waiting for events (or streams of them) \
                       already",
            retry_after: 1,
        })?;
        Ok(WaitSlot {
            _local: local,
            _place: place,
        })
    }

    /// This instance's part of [`Self::take`].
    fn take_here(&self, key: KeyId, customer: CustomerId) -> Result<LocalSlot, ApiError> {
        let mut waiting = self.slots.lock();
        if waiting.of_key.get(&key).copied().unwrap_or(0) >= MAX_WAITING_PER_KEY {
            return Err(ApiError::OperationLimited {
                what: "this key has 4 requests waiting for events (or streams of them) already",
                retry_after: 1,
            });
        }
        if waiting.total >= self.slots.max {
            return Err(ApiError::Busy("every place for a waiting request is taken"));
        }
        let reserve = (self.slots.max / 10).max(1);
        if waiting.total >= self.slots.max.saturating_sub(reserve)
            && waiting.of_customer.get(&customer).copied().unwrap_or(0) >= RESERVED_PER_CUSTOMER
        {
            return Err(ApiError::Busy(
                "every place for a waiting request is taken, but those kept for customers \
                 waiting on none",
            ));
        }
        *waiting.of_key.entry(key).or_insert(0) += 1;
        *waiting.of_customer.entry(customer).or_insert(0) += 1;
        waiting.total += 1;
        publish(&waiting);
        Ok(LocalSlot {
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
pub(crate) mod tests {
    use std::collections::HashSet;

    use posture_domain::rate_limit::{LimiterState, Place};

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

    /// Places counted in memory: what the instances share, in a test.
    #[derive(Default)]
    pub(crate) struct SharedPlaces(Mutex<HashSet<Place>>);

    #[async_trait::async_trait]
    impl Places for SharedPlaces {
        async fn take(&self, place: &Place, limit: u32) -> posture_domain::Result<bool> {
            let mut held = self.0.lock().unwrap();
            let of_customer = held
                .iter()
                .filter(|p| p.kind == place.kind && p.customer == place.customer)
                .count();
            Ok(of_customer < limit as usize && held.insert(place.clone()))
        }
        async fn keep(&self, _: &Place) -> posture_domain::Result<()> {
            Ok(())
        }
        async fn give_back(&self, place: &Place) -> posture_domain::Result<()> {
            self.0.lock().unwrap().remove(place);
            Ok(())
        }
        fn state(&self) -> LimiterState {
            LimiterState::InProcess
        }
    }

    fn waits(max: usize) -> EventWaits {
        EventWaits::new(Arc::new(NoChanges), max, Arc::new(SharedPlaces::default()))
    }

    /// Places given back settle once the tasks giving them back have run.
    pub(crate) async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn places_are_bounded_per_key_and_per_instance_and_given_back() {
        let waits = waits(6);
        let (a, b) = (KeyId::generate(), KeyId::generate());
        let (ca, cb) = (CustomerId::generate(), CustomerId::generate());
        let mut of_a = Vec::new();
        for _ in 0..MAX_WAITING_PER_KEY {
            of_a.push(waits.take(a, ca).await.unwrap());
        }
        assert!(matches!(
            waits.take(a, ca).await,
            Err(ApiError::OperationLimited { retry_after: 1, .. })
        ));
        let of_b = vec![
            waits.take(b, cb).await.unwrap(),
            waits.take(b, cb).await.unwrap(),
        ];
        assert!(
            matches!(waits.take(b, cb).await, Err(ApiError::Busy(_))),
            "the instance is full"
        );
        assert_eq!(waits.waiting(), 6);
        drop(of_a);
        assert_eq!(waits.waiting(), 2);
        settle().await;
        assert!(waits.take(b, cb).await.is_ok(), "places come back");
        drop(of_b);
        assert_eq!(waits.waiting(), 0);
    }

    /// A customer's places count over every instance: two instances sharing the places
    /// give a customer 32 in all, not 32 each.
    #[tokio::test]
    async fn one_customers_keys_hold_at_most_its_places_over_every_instance() {
        let shared: Arc<dyn Places> = Arc::new(SharedPlaces::default());
        let instances: Vec<EventWaits> = (0..2)
            .map(|_| EventWaits::new(Arc::new(NoChanges), 1000, shared.clone()))
            .collect();
        let greedy = CustomerId::generate();
        let mut held = Vec::new();
        for n in 0..MAX_WAITING_PER_CUSTOMER {
            let key = KeyId::generate();
            held.push(instances[n % 2].take(key, greedy).await.unwrap());
        }
        for instance in &instances {
            let refused = instance
                .take(KeyId::generate(), greedy)
                .await
                .err()
                .unwrap();
            assert!(
                matches!(refused, ApiError::OperationLimited { retry_after: 1, what }
                    if what.contains("32 requests waiting")),
                "a new key of the same customer waits no more, on either instance"
            );
        }
        let other = CustomerId::generate();
        assert!(
            instances[0].take(KeyId::generate(), other).await.is_ok(),
            "others still wait"
        );
        held.pop();
        settle().await;
        assert!(
            instances[1].take(KeyId::generate(), greedy).await.is_ok(),
            "a place came back"
        );
    }

    /// A busy instance keeps its last tenth for customers holding almost none of it: many
    /// customers each within their own bound cannot fill it for a newcomer.
    #[tokio::test]
    async fn a_customer_arriving_at_a_full_instance_still_gets_a_place() {
        let waits = waits(100);
        let mut held = Vec::new();
        // Three customers of 30 places each: 90 of 100, all but the reserve.
        let crowd: Vec<CustomerId> = (0..3).map(|_| CustomerId::generate()).collect();
        for customer in &crowd {
            for _ in 0..30 {
                held.push(waits.take(KeyId::generate(), *customer).await.unwrap());
            }
        }
        assert!(
            matches!(
                waits.take(KeyId::generate(), crowd[0]).await,
                Err(ApiError::Busy(_))
            ),
            "a customer holding many waits no more in the reserve"
        );
        for _ in 0..5 {
            let newcomer = CustomerId::generate();
            for _ in 0..RESERVED_PER_CUSTOMER {
                held.push(waits.take(KeyId::generate(), newcomer).await.unwrap());
            }
            assert!(
                matches!(
                    waits.take(KeyId::generate(), newcomer).await,
                    Err(ApiError::Busy(_))
                ),
                "two places of the reserve each"
            );
        }
        assert_eq!(waits.waiting(), 100);
    }

    #[test]
    fn a_wait_is_clamped_to_the_instances_longest() {
        use std::time::Duration;
        let short = waits(6).with_max_wait(Duration::from_secs(1));
        assert_eq!(
            waits(6).wait_for(Duration::from_secs(99)),
            Duration::from_secs(30)
        );
        assert_eq!(
            short.wait_for(Duration::from_secs(20)),
            Duration::from_secs(1)
        );
        assert_eq!(short.wait_for(Duration::ZERO), Duration::ZERO);
        let long = waits(6).with_max_wait(Duration::from_secs(90));
        assert_eq!(
            long.wait_for(Duration::from_secs(60)),
            Duration::from_secs(30)
        );
    }

    #[tokio::test]
    async fn stopping_lets_every_waiter_go() {
        let waits = waits(6);
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
