//! Word of changed data for requests waiting on the events feed, from the key cache's
//! `LISTEN` connection (the `posture_data` notification every pass sends at commit): a
//! waiting request reads the database again only when its customer's data changed, not on a
//! timer. While that connection is down, notifications may be missed: waiters then look
//! again every [`UNHEARD_EVERY`].

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use async_trait::async_trait;
use posture_domain::{
    CustomerId,
    ports::{DataChangeSubscription, DataChanges},
};
use tokio::sync::broadcast::{Receiver, error::RecvError};

use crate::{
    PgStore,
    caches::{Heard, KeyCache},
};

/// How often a waiter looks again while the `LISTEN` connection is down.
const UNHEARD_EVERY: Duration = Duration::from_secs(1);

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

impl DataChanges for PgStore {
    fn subscribe(&self, customer: CustomerId) -> Box<dyn DataChangeSubscription> {
        Box::new(Subscription {
            customer: customer.as_uuid(),
            changes: self.key_cache.changes.subscribe(),
            cache: Arc::clone(&self.key_cache),
        })
    }
}
