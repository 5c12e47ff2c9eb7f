//! Word of changed data for requests waiting on the events feed, from the key cache's
//! `LISTEN` connection (the `posture_data` notification every pass sends at commit): a
//! waiting request reads the database again only when its customer's data changed, not on a
//! timer. While that connection is down, notifications may be missed: waiters then look
//! again every [`UNHEARD_EVERY`].

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use posture_domain::{
    CustomerId,
    ports::{DataChangeSubscription, DataChanges},
};
use tokio::sync::broadcast::{Receiver, error::RecvError};

use super::KeyCache;
use crate::PgStore;

/// How often a waiter looks again while the `LISTEN` connection is down.
const UNHEARD_EVERY: Duration = Duration::from_secs(1);

struct Subscription {
    customer: uuid::Uuid,
    changes: Receiver<Option<uuid::Uuid>>,
    cache: Arc<KeyCache>,
}

#[async_trait]
impl DataChangeSubscription for Subscription {
    async fn changed(&mut self) {
        loop {
            let heard = tokio::time::timeout(UNHEARD_EVERY, self.changes.recv()).await;
            match heard {
                Ok(Ok(Some(customer))) if customer != self.customer => continue,
                // Ours, anyone's, or more than the buffer: look.
                Ok(Ok(_) | Err(RecvError::Lagged(_))) => return,
                // The cache (and its sender) outlives every request.
                Ok(Err(RecvError::Closed)) => return,
                Err(_) if !self.cache.is_live() => return,
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
