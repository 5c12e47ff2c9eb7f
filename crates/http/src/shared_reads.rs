//! Reads of the events feed shared by the requests a change woke together.
//!
//! When a pass commits, every request waiting on its customer wakes (long-polls and
//! streams). Most of them are where the feed ended (the same `after`) with the same filters,
//! and would each send PostgreSQL the same read. Here, a woken request joins a read of the
//! same page that began after it woke, or begins one: a read that began later than the
//! wake-up sees every commit announced before it, so joining it misses nothing, while a read
//! that began earlier might not have seen the commit that woke the request and is never
//! joined.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Instant,
};

use futures_util::{
    FutureExt as _,
    future::{BoxFuture, Shared},
};
use posture_domain::{
    CustomerId, CustomerScope,
    event::{EventFilter, EventPage},
    ports::EventRepository,
};

use crate::error::ApiError;

type Read = Shared<BoxFuture<'static, Result<Arc<EventPage>, ApiError>>>;

struct InFlight {
    began: Instant,
    read: Read,
}

/// A request's share of a read: when the read is done, or nobody else waits for it any
/// more, it leaves the table (a read every waiter gave up on is not kept).
struct Joined<'a> {
    reads: &'a SharedReads,
    key: (CustomerId, EventFilter),
    read: Read,
}

impl Drop for Joined<'_> {
    fn drop(&mut self) {
        let mut in_flight = self.reads.lock();
        // The table's clone and this one (`None`: the read is done).
        let unwanted = self.read.strong_count().is_none_or(|holders| holders <= 2);
        if unwanted
            && in_flight
                .get(&self.key)
                .is_some_and(|running| running.read.ptr_eq(&self.read))
        {
            in_flight.remove(&self.key);
        }
    }
}

/// The reads in flight, by customer and page.
#[derive(Clone, Default)]
pub struct SharedReads {
    in_flight: Arc<Mutex<HashMap<(CustomerId, EventFilter), InFlight>>>,
}

impl SharedReads {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(CustomerId, EventFilter), InFlight>> {
        self.in_flight
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The page `filter` names, for a request woken at `woken`: from a read of the same page
    /// that began since, or from one begun now (`errors` maps a failed read).
    pub async fn read(
        &self,
        events: Arc<dyn EventRepository>,
        scope: CustomerScope,
        filter: &EventFilter,
        woken: Instant,
        errors: fn(posture_domain::Error) -> ApiError,
    ) -> Result<Arc<EventPage>, ApiError> {
        let key = (scope.customer_id(), filter.clone());
        let read = {
            let mut in_flight = self.lock();
            match in_flight.get(&key) {
                Some(running) if running.began >= woken => running.read.clone(),
                _ => {
                    let filter = filter.clone();
                    let read = async move {
                        events
                            .list_events(scope, &filter)
                            .await
                            .map(Arc::new)
                            .map_err(errors)
                    }
                    .boxed()
                    .shared();
                    let began = Instant::now();
                    in_flight.insert(
                        key.clone(),
                        InFlight {
                            began,
                            read: read.clone(),
                        },
                    );
                    read
                }
            }
        };
        let joined = Joined {
            reads: self,
            key,
            read,
        };
        joined.read.clone().await
    }

    /// Reads in flight now.
    pub fn in_flight(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use posture_domain::{EventId, event::FindingEvent};
    use tokio::sync::Semaphore;

    use super::*;

    /// A feed whose reads are counted and wait for the test to let them finish.
    struct Gated {
        reads: AtomicUsize,
        gate: Semaphore,
    }

    #[async_trait]
    impl EventRepository for Gated {
        async fn list_events(
            &self,
            _: CustomerScope,
            _: &EventFilter,
        ) -> posture_domain::Result<EventPage> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            let _pass = self.gate.acquire().await.expect("open");
            Ok(EventPage::default())
        }

        async fn get_event(
            &self,
            _: CustomerScope,
            _: EventId,
        ) -> posture_domain::Result<FindingEvent> {
            unreachable!("not read here")
        }

        async fn purge_events(
            &self,
            _: chrono::DateTime<chrono::Utc>,
            _: u32,
        ) -> posture_domain::Result<u64> {
            unreachable!("not swept here")
        }
    }

    fn feed() -> Arc<Gated> {
        Arc::new(Gated {
            reads: AtomicUsize::new(0),
            gate: Semaphore::new(0),
        })
    }

    /// Returns once `feed` has begun `n` reads (a test fails, not hangs, when it does not).
    async fn begun(feed: &Gated, n: usize) {
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while feed.reads.load(Ordering::SeqCst) < n {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{n} reads did not begin"));
    }

    fn page(limit: u32) -> EventFilter {
        EventFilter {
            limit,
            ..EventFilter::default()
        }
    }

    fn read(
        reads: &SharedReads,
        feed: &Arc<Gated>,
        scope: CustomerScope,
        filter: EventFilter,
        woken: Instant,
    ) -> tokio::task::JoinHandle<Result<Arc<EventPage>, ApiError>> {
        let (reads, feed) = (reads.clone(), feed.clone());
        tokio::spawn(async move {
            reads
                .read(feed, scope, &filter, woken, ApiError::from)
                .await
        })
    }

    #[tokio::test]
    async fn requests_woken_together_share_one_read_of_the_same_page() {
        let (reads, feed) = (SharedReads::default(), feed());
        let scope = CustomerScope::for_operator(posture_domain::CustomerId::generate());
        let other = CustomerScope::for_operator(posture_domain::CustomerId::generate());
        let woken = Instant::now();
        let mut waiting: Vec<_> = (0..10)
            .map(|_| read(&reads, &feed, scope, page(100), woken))
            .collect();
        // Another page, or another customer's: reads of their own.
        waiting.push(read(&reads, &feed, scope, page(5), woken));
        waiting.push(read(&reads, &feed, other, page(100), woken));
        begun(&feed, 3).await;
        assert_eq!(reads.in_flight(), 3);
        feed.gate.add_permits(3);
        for request in waiting {
            assert!(request.await.unwrap().is_ok());
        }
        assert_eq!(feed.reads.load(Ordering::SeqCst), 3, "one read per page");
        assert_eq!(reads.in_flight(), 0, "done reads leave the table");
    }

    #[tokio::test]
    async fn a_read_begun_before_a_request_woke_is_not_joined() {
        let (reads, feed) = (SharedReads::default(), feed());
        let scope = CustomerScope::for_operator(posture_domain::CustomerId::generate());
        let first = read(&reads, &feed, scope, page(100), Instant::now());
        begun(&feed, 1).await;
        // Woken after that read began: it might not see what woke this one.
        let later = read(&reads, &feed, scope, page(100), Instant::now());
        begun(&feed, 2).await;
        feed.gate.add_permits(2);
        assert!(first.await.unwrap().is_ok());
        assert!(later.await.unwrap().is_ok());
        assert_eq!(reads.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_read_every_request_gave_up_on_leaves_the_table() {
        let (reads, feed) = (SharedReads::default(), feed());
        let scope = CustomerScope::for_operator(posture_domain::CustomerId::generate());
        let woken = Instant::now();
        let abandoned = [
            read(&reads, &feed, scope, page(100), woken),
            read(&reads, &feed, scope, page(100), woken),
        ];
        begun(&feed, 1).await;
        assert_eq!(
            feed.reads.load(Ordering::SeqCst),
            1,
            "the two share one read"
        );
        for request in abandoned {
            request.abort();
            let _ = request.await;
        }
        assert_eq!(reads.in_flight(), 0);
    }
}
