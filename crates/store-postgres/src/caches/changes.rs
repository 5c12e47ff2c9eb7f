//! Word of changed data for requests waiting on the events feed, from the `LISTEN`
//! connection (`listen.rs`: the `posture_data` notification every pass sends at commit): a
//! waiting request reads the database again only when its customer's data changed, not on a
//! timer. While that connection is down, notifications may be missed: waiters then look
//! again every [`UNHEARD_EVERY`].

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use async_trait::async_trait;
use posture_domain::{CustomerId, ports::DataChangeSubscription};
use tokio::sync::broadcast::{Receiver, error::RecvError};

use super::keys::{Heard, KeyCache};

/// How often a waiter looks again while the `LISTEN` connection is down.
const UNHEARD_EVERY: Duration = Duration::from_secs(1);

/// What a request waiting for `customer`'s data to change listens to.
pub(crate) fn subscription(
    cache: &Arc<KeyCache>,
    customer: CustomerId,
) -> Box<dyn DataChangeSubscription> {
    Box::new(Subscription {
        customer: customer.as_uuid(),
        changes: cache.changes(),
        cache: Arc::clone(cache),
    })
}

struct Subscription {
    customer: uuid::Uuid,
    changes: Receiver<Heard>,
    cache: Arc<KeyCache>,
}

#[async_trait]
impl DataChangeSubscription for Subscription {
    async fn changed(&mut self) -> Instant {
        loop {
            let heard = tokio::time::timeout(UNHEARD_EVERY, self.changes.recv()).await;
            match heard {
                Ok(Ok(heard)) if heard.customer.is_some_and(|c| c != self.customer) => continue,
                // Ours, or anyone's: look.
                Ok(Ok(heard)) => return heard.at,
                // More than the buffer, unheard: look, with a read begun from now.
                Ok(Err(RecvError::Lagged(_))) => return Instant::now(),
                // The cache (and its sender) outlives every request.
                Ok(Err(RecvError::Closed)) => return Instant::now(),
                Err(_) if !self.cache.is_live() => return Instant::now(),
                Err(_) => continue,
            }
        }
    }
}
