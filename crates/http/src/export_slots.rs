//! Export slots: how many exports stream at once per instance, shared fairly.
//!
//! An export holds a database connection (and a snapshot) for as long as it streams, so
//! their number is bounded (`slots`). One customer holds at most `per_customer` of them
//! (half the slots, at least one), so no customer can take them all. A request that cannot
//! get a slot within `wait` is answered 503 with `Retry-After` rather than queueing for
//! ever. A slot is given back when the export ends, whatever ends it (the last line, the
//! client going away, the stall bound of `routes/export/`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use posture_domain::CustomerId;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The export slots of one instance.
pub struct ExportSlots {
    total: Arc<Semaphore>,
    per_customer: usize,
    wait: Duration,
    /// The customers exporting or waiting to, with their own semaphores.
    customers: Mutex<HashMap<CustomerId, Arc<Semaphore>>>,
}

/// Why no slot was given.
#[derive(Debug, PartialEq, Eq)]
pub enum NoSlot {
    /// Every slot stayed busy for the whole wait.
    Busy,
}

/// A slot, held for the whole export.
pub struct ExportSlot {
    /// The permits, given back when the slot is dropped (`None` only during the drop).
    permits: Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)>,
    customer: CustomerId,
    slots: Arc<ExportSlots>,
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
    /// 1), a request waiting at most `wait` for its turn.
    pub fn new(slots: usize, wait: Duration) -> Self {
        let slots = slots.max(1);
        metrics::gauge!("posture_export_slots", "state" => "max").set(slots as f64);
        Self {
            total: Arc::new(Semaphore::new(slots)),
            per_customer: (slots / 2).max(1),
            wait,
            customers: Mutex::default(),
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

    /// A slot for `customer`: its own share first, then one of the instance's.
    pub async fn acquire(self: &Arc<Self>, customer: CustomerId) -> Result<ExportSlot, NoSlot> {
        let own = self.customer_semaphore(customer);
        let total = self.total.clone();
        let acquired = tokio::time::timeout(self.wait, async move {
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

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_millis(50);

    #[tokio::test]
    async fn one_customer_cannot_take_every_slot() {
        let slots = Arc::new(ExportSlots::new(2, WAIT));
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
        assert!(slots.acquire(a).await.is_ok(), "a's slot came back");
        drop(other);
    }

    #[tokio::test]
    async fn waiting_ends_after_the_wait_with_busy() {
        let slots = Arc::new(ExportSlots::new(1, WAIT));
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
        let slots = Arc::new(ExportSlots::new(1, Duration::from_secs(5)));
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
        let slots = Arc::new(ExportSlots::new(4, WAIT));
        for _ in 0..100 {
            let slot = slots.acquire(CustomerId::generate()).await.unwrap();
            drop(slot);
        }
        assert_eq!(slots.tracked(), 0);
        assert_eq!(slots.available(), 4);
    }
}
