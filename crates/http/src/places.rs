//! A place a customer holds while a request lasts (a wait on the events feed, an export),
//! counted over every instance when the places are shared (`posture-rate-limit`): taken
//! before the request waits or streams, renewed while it lasts, given back when it ends
//! however it ends.

use std::sync::Arc;

use posture_domain::{
    CustomerId,
    rate_limit::{PLACE_LEASE, Place, PlaceKind, Places},
};

use crate::error::ApiError;

/// A place held; given back when dropped.
pub struct HeldPlace {
    place: Place,
    places: Arc<dyn Places>,
    renewing: tokio::task::JoinHandle<()>,
}

impl HeldPlace {
    /// A place of `kind` for a request of `customer`, if the customer holds fewer than
    /// `limit` of them; `None` if not.
    pub async fn take(
        places: &Arc<dyn Places>,
        kind: PlaceKind,
        customer: CustomerId,
        limit: u32,
    ) -> Result<Option<Self>, ApiError> {
        let place = Place::new(kind, customer);
        if !places.take(&place, limit).await? {
            return Ok(None);
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
