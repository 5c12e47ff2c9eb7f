//! Places a customer holds at once (requests waiting on the events feed, exports in flight):
//! in this process ([`InProcessPlaces`]), or over every instance through Redis (the
//! [`RedisRateLimiter`]'s connection), each customer's places of a kind a sorted set of
//! their holders scored by when their lease ends. A holder renews its lease while its request
//! lasts; an instance that dies leaves places that lapse with their leases. While Redis is
//! unreachable, places are counted in this process (a request is never refused because of
//! Redis), and one taken then is given back in both.

use std::{
    collections::{HashMap, HashSet},
    sync::Mutex,
};

use async_trait::async_trait;
use posture_domain::{
    CustomerId, Result,
    rate_limit::{LimiterState, Place, PlaceKind, Places},
};

use crate::{RedisRateLimiter, lock};

/// Takes a place if fewer than the limit are held (ARGV: the limit, the holder, the lease in
/// ms): drops lapsed holders first; 1 when taken, 0 when not.
pub(crate) const TAKE_SCRIPT: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
  return 1
end
return 0
";

/// Renews a holder's lease, if it still holds its place (ARGV: the holder, the lease in ms).
pub(crate) const KEEP_SCRIPT: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if redis.call('ZADD', KEYS[1], 'XX', 'CH', now + tonumber(ARGV[2]), ARGV[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
end
return 1
";

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
        let mut held = lock(&self.held);
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
        let mut held = lock(&self.held);
        if let Some(holders) = held.get_mut(&(place.kind, place.customer)) {
            holders.remove(&place.holder);
            if holders.is_empty() {
                held.remove(&(place.kind, place.customer));
            }
        }
    }

    /// Customers holding places (for tests: nobody is kept once they hold none).
    pub fn customers(&self) -> usize {
        lock(&self.held).len()
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

    fn state(&self) -> LimiterState {
        LimiterState::InProcess
    }
}

/// The Redis key of a customer's places of a kind (a hash tag: one Redis Cluster slot).
fn places_key(place: &Place) -> String {
    format!(
        "posture:places:{{{}:{}}}",
        place.kind.as_str(),
        place.customer
    )
}

impl RedisRateLimiter {
    fn lease_ms(&self) -> u64 {
        u64::try_from(self.place_lease.as_millis()).unwrap_or(u64::MAX)
    }
}

#[async_trait]
impl Places for RedisRateLimiter {
    async fn take(&self, place: &Place, limit: u32) -> Result<bool> {
        let key = places_key(place);
        let taken = self
            .on_redis(|mut conn| async move {
                self.take_place_script
                    .key(&key)
                    .arg(limit)
                    .arg(place.holder.to_string())
                    .arg(self.lease_ms())
                    .invoke_async::<i64>(&mut conn)
                    .await
            })
            .await;
        Ok(match taken {
            Some(taken) => taken == 1,
            None => self.places.take_here(place, limit),
        })
    }

    async fn keep(&self, place: &Place) -> Result<()> {
        let key = places_key(place);
        // A lease Redis cannot renew now is renewed at the next turn, well before it ends.
        let _ = self
            .on_redis(|mut conn| async move {
                self.keep_place_script
                    .key(&key)
                    .arg(place.holder.to_string())
                    .arg(self.lease_ms())
                    .invoke_async::<i64>(&mut conn)
                    .await
            })
            .await;
        Ok(())
    }

    async fn give_back(&self, place: &Place) -> Result<()> {
        // Taken here while Redis was away, or there: given back in both (a place Redis does
        // not hear of lapses with its lease).
        self.places.give_back_here(place);
        let key = places_key(place);
        let _ = self
            .on_redis(|mut conn| async move {
                redis::cmd("ZREM")
                    .arg(&key)
                    .arg(place.holder.to_string())
                    .query_async::<i64>(&mut conn)
                    .await
            })
            .await;
        Ok(())
    }

    fn state(&self) -> LimiterState {
        posture_domain::rate_limit::RateLimiter::state(self)
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
