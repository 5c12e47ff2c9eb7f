//! Places a customer holds at once (requests waiting on the events feed, exports in flight),
//! in this process: an instance's own without Redis, and the fallback of the places shared
//! through Redis (`shared_places.rs`) while Redis is unreachable.

use std::{
    collections::{HashMap, HashSet},
    sync::Mutex,
};

use async_trait::async_trait;
use posture_domain::{
    CustomerId, Result,
    rate_limit::{LimiterState, Place, PlaceKind, Places},
};

/// Places in this process: the counter of one instance without Redis, and the fallback of
/// the shared one. A place is held until given back (no lease: this process's holders
/// always give theirs back).
#[derive(Default)]
pub struct InProcessPlaces {
    held: Mutex<HashMap<(PlaceKind, CustomerId), HashSet<uuid::Uuid>>>,
}

impl InProcessPlaces {
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn take_here(&self, place: &Place, limit: u32) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let holders = held.entry((place.kind, place.customer)).or_default();
        if holders.len() >= limit as usize {
            if holders.is_empty() {
                held.remove(&(place.kind, place.customer));
            }
            return false;
        }
        holders.insert(place.holder);
        true
    }

    pub(crate) fn give_back_here(&self, place: &Place) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(holders) = held.get_mut(&(place.kind, place.customer)) {
            holders.remove(&place.holder);
            if holders.is_empty() {
                held.remove(&(place.kind, place.customer));
            }
        }
    }

    /// Customers holding places (for tests: nobody is kept once they hold none).
    pub fn customers(&self) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[async_trait]
impl Places for InProcessPlaces {
    async fn take(&self, place: &Place, limit: u32) -> Result<bool> {
        Ok(self.take_here(place, limit))
    }

    async fn keep(&self, _place: &Place) -> Result<()> {
        Ok(())
    }

    async fn give_back(&self, place: &Place) -> Result<()> {
        self.give_back_here(place);
        Ok(())
    }

    fn give_back_now(&self, place: &Place) -> bool {
        self.give_back_here(place);
        true
    }

    fn state(&self) -> LimiterState {
        LimiterState::InProcess
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_customer_holds_at_most_its_limit_and_places_come_back() {
        let places = InProcessPlaces::new();
        let (a, b) = (CustomerId::generate(), CustomerId::generate());
        let held: Vec<Place> = (0..2).map(|_| Place::new(PlaceKind::Export, a)).collect();
        for place in &held {
            assert!(places.take(place, 2).await.unwrap());
        }
        let third = Place::new(PlaceKind::Export, a);
        assert!(!places.take(&third, 2).await.unwrap());
        assert!(
            places
                .take(&Place::new(PlaceKind::Waiting, a), 2)
                .await
                .unwrap(),
            "another kind counts apart"
        );
        assert!(
            places
                .take(&Place::new(PlaceKind::Export, b), 2)
                .await
                .unwrap()
        );
        places.give_back(&held[0]).await.unwrap();
        assert!(places.take(&third, 2).await.unwrap(), "a place came back");
        for place in [&held[1], &third] {
            places.give_back(place).await.unwrap();
        }
        assert!(
            !places
                .take(&Place::new(PlaceKind::Export, b), 0)
                .await
                .unwrap()
        );
        assert_eq!(places.customers(), 2, "a's waiting place and b's export");
    }
}
