//! A place a customer holds while a request lasts (a wait on the events feed, an export),
//! counted over every instance when the places are shared (`posture-rate-limit`): taken
//! before the request waits or streams, renewed while it lasts, given back when it ends
//! however it ends.

use std::{sync::Arc, time::Duration};

use posture_domain::{
    CustomerId,
    rate_limit::{PLACE_LEASE, Place, PlaceKind, Places},
};

use crate::error::ApiError;

/// How often a refused place is asked again within a request's patience.
const RETRY_EVERY: Duration = Duration::from_millis(25);

/// A place held; given back when dropped.
pub struct HeldPlace {
    place: Place,
    places: Arc<dyn Places>,
    renewing: tokio::task::JoinHandle<()>,
}

impl HeldPlace {
    /// A place of `kind` for a request of `customer`, if the customer holds fewer than
    /// `limit` of them within `patience` (a place given back a moment ago, by a request
    /// whose answer its client has just read, may still be on its way back); `None` if not.
    pub async fn take(
        places: &Arc<dyn Places>,
        (kind, customer): (PlaceKind, CustomerId),
        limit: u32,
        patience: Duration,
    ) -> Result<Option<Self>, ApiError> {
        let place = Place::new(kind, customer);
        let deadline = tokio::time::Instant::now() + patience;
        while !places.take(&place, limit).await? {
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(RETRY_EVERY.min(patience)).await;
        }
        let renewing = tokio::spawn({
            let (place, places) = (place.clone(), places.clone());
            async move {
                let mut every = tokio::time::interval(PLACE_LEASE / 3);
                every.tick().await;
                loop {
                    every.tick().await;
                    if let Err(e) = places.keep(&place).await {
                        tracing::debug!(error = %e, "renewing a place failed; renewed at the next turn");
                    }
                }
            }
        });
        Ok(Some(Self {
            place,
            places: places.clone(),
            renewing,
        }))
    }
}

impl Drop for HeldPlace {
    fn drop(&mut self) {
        self.renewing.abort();
        if self.places.give_back_now(&self.place) {
            return;
        }
        let (place, places) = (self.place.clone(), self.places.clone());
        // Dropped where no runtime runs (a test's end): the place lapses with its lease.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = places.give_back(&place).await {
                    tracing::debug!(error = %e, "giving a place back failed; it lapses with its lease");
                }
            });
        }
    }
}
