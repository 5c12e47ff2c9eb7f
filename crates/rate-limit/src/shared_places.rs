//! Places a customer holds at once, over every instance through Redis (the
//! [`RedisRateLimiter`]'s connection): each customer's places of a kind a sorted set of
//! their holders scored by when their lease ends. A holder renews its lease while its request
//! lasts; an instance that dies leaves places that lapse with their leases. While Redis is
//! unreachable, places are counted in this process (a request is never refused because of
//! Redis), and one taken then is given back in both.

use std::sync::LazyLock;

use async_trait::async_trait;
use posture_domain::{
    Result,
    rate_limit::{LimiterState, Place, Places},
};

use crate::shared::RedisRateLimiter;

/// Takes a place if fewer than the limit are held (ARGV: the limit, the holder, the lease in
/// ms): drops lapsed holders first; 1 when taken, 0 when not.
const TAKE_SCRIPT: &str = r"
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

/// Renews a holder's lease (ARGV: the holder, the lease in ms), adding it again if Redis lost
/// it (restarted, or unreachable for longer than the lease): a request still running is
/// counted while it runs.
const KEEP_SCRIPT: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
";

static TAKE: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(TAKE_SCRIPT));
static KEEP: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(KEEP_SCRIPT));

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

    /// Takes `place`'s holder out of Redis, if Redis answers (if not, its lease ends it).
    async fn forget_in_redis(&self, place: &Place) {
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
    }
}

#[async_trait]
impl Places for RedisRateLimiter {
    async fn take(&self, place: &Place, limit: u32) -> Result<bool> {
        let key = places_key(place);
        let taken = self
            .on_redis(|mut conn| async move {
                TAKE.key(&key)
                    .arg(limit)
                    .arg(place.holder.to_string())
                    .arg(self.lease_ms())
                    .invoke_async::<i64>(&mut conn)
                    .await
            })
            .await;
        Ok(match taken {
            Some(taken) => taken == 1,
            None => {
                let taken = self.places.take_here(place, limit);
                if !taken {
                    // Redis may have taken it after all and answered too late: no one would
                    // give that back before its lease ends.
                    self.forget_in_redis(place).await;
                }
                taken
            }
        })
    }

    async fn keep(&self, place: &Place) -> Result<()> {
        let key = places_key(place);
        // A lease Redis cannot renew now is renewed at the next turn, well before it ends.
        let _ = self
            .on_redis(|mut conn| async move {
                KEEP.key(&key)
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
        self.forget_in_redis(place).await;
        Ok(())
    }

    fn state(&self) -> LimiterState {
        posture_domain::rate_limit::RateLimiter::state(self)
    }
}
