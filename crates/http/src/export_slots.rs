//! Export slots: how many exports stream at once per instance, shared fairly, and per
//! customer over every instance.
//!
//! An export holds a database connection (and a snapshot) for as long as it streams, so
//! their number is bounded (`slots`). One customer holds at most `per_customer` of them
//! (half the slots, at least one), so no customer can take them all; and at most
//! [`EXPORTS_PER_CUSTOMER`] over every instance (its places, shared through Redis when it
//! is configured: `crate::places`). A request that cannot get a slot within `wait` is
//! answered 503 with `Retry-After` rather than queueing for ever; one whose customer has its
//! exports streaming already, 429. A slot is given back when the export ends, whatever ends
//! it (the last line, the client going away, the stall bound of `routes/export/`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use posture_domain::{
    CustomerId,
    rate_limit::{PlaceKind, Places},
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::places::HeldPlace;

/// Exports one customer streams at once, over every instance.
pub const EXPORTS_PER_CUSTOMER: u32 = 2;

/// The export slots of one instance.
pub struct ExportSlots {
    total: Arc<Semaphore>,
    per_customer: usize,
    wait: Duration,
    /// The customers exporting or waiting to, with their own semaphores.
    customers: Mutex<HashMap<CustomerId, Arc<Semaphore>>>,
    /// The customers' places over every instance.
    places: Arc<dyn Places>,
}

/// Why no slot was given.
#[derive(Debug, PartialEq, Eq)]
pub enum NoSlot {
    /// Every slot stayed busy for the whole wait.
    Busy,
    /// The customer has [`EXPORTS_PER_CUSTOMER`] exports streaming already.
    CustomerBusy,
}

/// A slot, held for the whole export.
pub struct ExportSlot {
    /// The permits, given back when the slot is dropped (`None` only during the drop).
    permits: Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)>,
    customer: CustomerId,
    slots: Arc<ExportSlots>,
    _place: HeldPlace,
}

impl Drop for ExportSlot {
    fn drop(&mut self) {
        // Give the permits back first, so the customer's semaphore is idle again.
        self.permits.take();
        metrics::gauge!("posture_export_slots", "state" => "in_use").decrement(1.0);
        self.slots.forget_idle(self.customer);
    }
}

impl ExportSlots {
    /// `slots` exports at once (at least 1), each customer at most half of them (at least
    /// 1), a request waiting at most `wait` for its turn; each customer's exports over
    /// every instance counted in `places`.
    pub fn new(slots: usize, wait: Duration, places: Arc<dyn Places>) -> Self {
        let slots = slots.max(1);
        metrics::gauge!("posture_export_slots", "state" => "max").set(slots as f64);
        Self {
            total: Arc::new(Semaphore::new(slots)),
            per_customer: (slots / 2).max(1),
            wait,
            customers: Mutex::default(),
            places,
        }
    }

    /// Slots a customer may hold at once.
    pub fn per_customer(&self) -> usize {
        self.per_customer
    }

    /// Slots free now.
    pub fn available(&self) -> usize {
        self.total.available_permits()
    }

    fn customer_semaphore(&self, customer: CustomerId) -> Arc<Semaphore> {
        let mut customers = self
            .customers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        customers
            .entry(customer)
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_customer)))
            .clone()
    }

    /// Drops the customer's semaphore once nobody holds or waits for it.
    fn forget_idle(&self, customer: CustomerId) {
        let mut customers = self
            .customers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if customers.get(&customer).is_some_and(|s| {
            Arc::strong_count(s) == 1 && s.available_permits() == self.per_customer
        }) {
            customers.remove(&customer);
        }
    }

    /// A slot for `customer`: its place over every instance, then its own share of this
    /// instance, then one of the instance's, each waited for within the wait.
    pub async fn acquire(self: &Arc<Self>, customer: CustomerId) -> Result<ExportSlot, NoSlot> {
        let started = tokio::time::Instant::now();
        let place = match HeldPlace::take(
            &self.places,
            (PlaceKind::Export, customer),
            EXPORTS_PER_CUSTOMER,
            self.wait,
        )
        .await
        {
            Ok(Some(place)) => place,
            Ok(None) => {
                metrics::counter!("posture_export_slot_refusals_total").increment(1);
                return Err(NoSlot::CustomerBusy);
            }
            // The places never fail (they count in this process when Redis does not answer):
            // a failure here is a bug, and the export is refused as busy.
            Err(_) => return Err(NoSlot::Busy),
        };
        let own = self.customer_semaphore(customer);
        let total = self.total.clone();
        let acquired =
            tokio::time::timeout(self.wait.saturating_sub(started.elapsed()), async move {
                let own = own.acquire_owned().await.ok()?;
                let total = total.acquire_owned().await.ok()?;
                Some((own, total))
            })
            .await;
        match acquired {
            Ok(Some(permits)) => Ok({
                metrics::gauge!("posture_export_slots", "state" => "in_use").increment(1.0);
                ExportSlot {
                    permits: Some(permits),
                    customer,
                    slots: self.clone(),
                    _place: place,
                }
            }),
            _ => {
                self.forget_idle(customer);
                metrics::counter!("posture_export_slot_refusals_total").increment(1);
                Err(NoSlot::Busy)
            }
        }
    }

    /// Customers with a semaphore (exporting or waiting).
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.customers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
    }
}

/// How a client hears that no export place was free.
impl From<NoSlot> for crate::error::ApiError {
    fn from(refused: NoSlot) -> Self {
        match refused {
            NoSlot::Busy => Self::Busy("every export slot is in use; retry"),
            NoSlot::CustomerBusy => Self::OperationLimited {
                what: "your keys have 2 exports streaming already",
                retry_after: 5,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_waits::tests::SharedPlaces;

    fn slots(n: usize, wait: Duration) -> Arc<ExportSlots> {
        Arc::new(ExportSlots::new(n, wait, Arc::new(SharedPlaces::default())))
    }

    const WAIT: Duration = Duration::from_millis(50);

    #[tokio::test]
    async fn one_customer_cannot_take_every_slot() {
        let slots = slots(2, WAIT);
        let a = CustomerId::generate();
        let b = CustomerId::generate();
        let first = slots.acquire(a).await.unwrap();
        assert_eq!(
            slots.acquire(a).await.err(),
            Some(NoSlot::Busy),
            "a's share is 1"
        );
        let other = slots.acquire(b).await.unwrap();
        drop(first);
        crate::event_waits::tests::settle().await;
        assert!(slots.acquire(a).await.is_ok(), "a's slot came back");
        drop(other);
    }

    /// Two instances sharing the places give a customer 2 exports in all, not 2 each.
    #[tokio::test]
    async fn a_customer_streams_at_most_its_exports_over_every_instance() {
        let shared: Arc<dyn Places> = Arc::new(SharedPlaces::default());
        let instances: Vec<Arc<ExportSlots>> = (0..2)
            .map(|_| Arc::new(ExportSlots::new(4, WAIT, shared.clone())))
            .collect();
        let a = CustomerId::generate();
        let held = [
            instances[0].acquire(a).await.unwrap(),
            instances[1].acquire(a).await.unwrap(),
        ];
        for instance in &instances {
            assert_eq!(instance.acquire(a).await.err(), Some(NoSlot::CustomerBusy));
        }
        assert!(instances[0].acquire(CustomerId::generate()).await.is_ok());
        drop(held);
    }

    #[tokio::test]
    async fn waiting_ends_after_the_wait_with_busy() {
        let slots = slots(1, WAIT);
        let held = slots.acquire(CustomerId::generate()).await.unwrap();
        let started = std::time::Instant::now();
        assert_eq!(
            slots.acquire(CustomerId::generate()).await.err(),
            Some(NoSlot::Busy)
        );
        assert!(started.elapsed() >= WAIT);
        drop(held);
        assert!(slots.acquire(CustomerId::generate()).await.is_ok());
    }

    #[tokio::test]
    async fn a_waiter_gets_the_slot_when_it_is_given_back() {
        let slots = slots(1, Duration::from_secs(5));
        let held = slots.acquire(CustomerId::generate()).await.unwrap();
        let waiter = {
            let slots = slots.clone();
            tokio::spawn(async move { slots.acquire(CustomerId::generate()).await.is_ok() })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(held);
        assert!(waiter.await.unwrap());
    }

    #[tokio::test]
    async fn customers_are_forgotten_when_they_hold_nothing() {
        let slots = slots(4, WAIT);
        for _ in 0..100 {
            let slot = slots.acquire(CustomerId::generate()).await.unwrap();
            drop(slot);
        }
        assert_eq!(slots.tracked(), 0);
        assert_eq!(slots.available(), 4);
    }
}
