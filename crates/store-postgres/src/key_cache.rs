//! The authenticated-key cache: a request with a known key costs no database round trip,
//! and a revocation still takes effect on the next request.
//!
//! A trigger on `api_keys` (migration 4) sends `NOTIFY posture_keys` whenever a key's
//! revocation, expiry, scopes or owner change, or a key is deleted. Each serving process
//! holds one `LISTEN` connection ([`PgStore::start_key_cache`]) and empties its cache on
//! every notification. Entries are served only while that connection is up (it is checked
//! every [`PING_EVERY`]); while it is down every request reads the database, as without a
//! cache. Three more rules keep it exact:
//!
//! - A lookup caches its result only if no invalidation happened since it started (the
//!   generation counter), so a row read just before a revocation is never cached after it.
//! - Expiry is checked on every hit; entries also age out after [`MAX_AGE`] as a backstop.
//! - Unknown keys are never cached: a key issued a moment ago works at once, and guessed
//!   keys cannot fill the cache.

use std::{
    collections::HashMap,
    pin::pin,
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use diesel_async::{AsyncConnection, AsyncPgConnection};
use futures_util::StreamExt as _;
use posture_domain::{KeyHash, Principal};

use crate::PgStore;

/// The channel the `api_keys` trigger notifies.
pub(crate) const CHANNEL: &str = "posture_keys";
/// Longest an entry is served without reading the database again.
const MAX_AGE: Duration = Duration::from_secs(60);
/// Entries kept at most; the cache starts over when full.
const MAX_ENTRIES: usize = 10_000;
/// How often the idle `LISTEN` connection is checked.
const PING_EVERY: Duration = Duration::from_secs(10);
/// Pause before reconnecting a lost `LISTEN` connection.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

struct Entry {
    hash: KeyHash,
    principal: Principal,
    expires_at: Option<DateTime<Utc>>,
    cached_at: Instant,
}

/// Cache hits and misses since start, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyCacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Whether entries are being served (the `LISTEN` connection is up).
    pub live: bool,
}

#[derive(Default)]
pub(crate) struct KeyCache {
    live: AtomicBool,
    generation: AtomicU64,
    entries: Mutex<HashMap<[u8; 32], Entry>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl KeyCache {
    fn entries(&self) -> MutexGuard<'_, HashMap<[u8; 32], Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The principal of a cached, still valid key.
    pub(crate) fn get(&self, hash: &KeyHash, now: DateTime<Utc>) -> Option<Principal> {
        let found = self.live.load(Ordering::Acquire).then(|| {
            let entries = self.entries();
            entries
                .get(hash.as_bytes())
                // The map found it by hash; confirm in constant time all the same.
                .filter(|e| e.hash == *hash)
                .filter(|e| e.cached_at.elapsed() < MAX_AGE)
                .filter(|e| e.expires_at.is_none_or(|at| at > now))
                .map(|e| e.principal.clone())
        });
        match found.flatten() {
            Some(principal) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(principal)
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// The generation to hand back to [`KeyCache::insert`] after reading the database.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Caches a key read from the database, unless the cache was invalidated since
    /// `generation` was taken (the row may predate a revocation).
    pub(crate) fn insert(
        &self,
        hash: KeyHash,
        principal: Principal,
        expires_at: Option<DateTime<Utc>>,
        generation: u64,
    ) {
        if !self.live.load(Ordering::Acquire) {
            return;
        }
        let mut entries = self.entries();
        // Invalidation bumps the generation while holding the lock: checked under it.
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(
            hash.0,
            Entry {
                hash,
                principal,
                expires_at,
                cached_at: Instant::now(),
            },
        );
    }

    /// Forgets every entry (a key changed somewhere, or notifications may have been missed).
    pub(crate) fn invalidate(&self) {
        let mut entries = self.entries();
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.clear();
    }

    fn set_live(&self, live: bool) {
        self.invalidate();
        self.live.store(live, Ordering::Release);
    }

    pub(crate) fn stats(&self) -> KeyCacheStats {
        KeyCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            live: self.live.load(Ordering::Acquire),
        }
    }
}

/// Why the `LISTEN` connection of the key cache ended.
#[derive(Debug, thiserror::Error)]
enum ListenError {
    #[error("cannot connect")]
    Connect(#[source] diesel::ConnectionError),
    #[error("the connection failed")]
    Query(#[source] diesel::result::Error),
    #[error("the LISTEN connection closed")]
    Closed,
    #[error("the LISTEN connection stopped answering")]
    Stalled,
}

impl PgStore {
    /// Starts serving authenticated keys from memory, invalidated through `LISTEN` (call
    /// once per serving process, inside its runtime). Without it every request reads the
    /// key from the database.
    pub fn start_key_cache(&self) -> tokio::task::JoinHandle<()> {
        let store = self.clone();
        tokio::spawn(async move {
            let mut warned = false;
            loop {
                match store.follow_key_changes().await {
                    Ok(()) => {}
                    Err(e) if !warned => {
                        tracing::warn!(
                            error = &e as &dyn std::error::Error,
                            "the key cache is off until PostgreSQL answers its LISTEN connection"
                        );
                        warned = true;
                    }
                    Err(_) => {}
                }
                store.key_cache.set_live(false);
                tokio::time::sleep(RECONNECT_AFTER).await;
            }
        })
    }

    /// Listens until the connection fails; the cache is live meanwhile.
    async fn follow_key_changes(&self) -> Result<(), ListenError> {
        use diesel_async::RunQueryDsl as _;

        let mut conn = AsyncPgConnection::establish(&self.url)
            .await
            .map_err(ListenError::Connect)?;
        diesel::sql_query(format!("LISTEN {CHANNEL}"))
            .execute(&mut conn)
            .await
            .map_err(ListenError::Query)?;
        // Anything cached before this point may have missed a notification.
        self.key_cache.set_live(true);
        tracing::debug!("key cache live");
        loop {
            let quiet = {
                let mut notifications = pin!(conn.notifications_stream());
                match tokio::time::timeout(PING_EVERY, notifications.next()).await {
                    Err(_) => true,
                    Ok(Some(Ok(_))) => {
                        self.key_cache.invalidate();
                        false
                    }
                    Ok(Some(Err(e))) => return Err(ListenError::Query(e)),
                    Ok(None) => return Err(ListenError::Closed),
                }
            };
            if quiet {
                tokio::time::timeout(PING_EVERY, diesel::sql_query("SELECT 1").execute(&mut conn))
                    .await
                    .map_err(|_| ListenError::Stalled)?
                    .map_err(ListenError::Query)?;
            }
        }
    }

    /// Hits and misses of the key cache.
    pub fn key_cache_stats(&self) -> KeyCacheStats {
        self.key_cache.stats()
    }
}

#[cfg(test)]
mod tests {
    use posture_domain::{CustomerId, KeyId, Scope, ScopeSet};

    use super::*;

    fn principal() -> Principal {
        Principal::verified(
            KeyId::generate(),
            CustomerId::generate(),
            [Scope::ReadFindings].into_iter().collect::<ScopeSet>(),
        )
    }

    fn live() -> KeyCache {
        let cache = KeyCache::default();
        cache.set_live(true);
        cache
    }

    #[test]
    fn nothing_is_served_while_the_listen_connection_is_down() {
        let cache = KeyCache::default();
        let generation = cache.generation();
        cache.insert(KeyHash([1; 32]), principal(), None, generation);
        assert_eq!(cache.get(&KeyHash([1; 32]), Utc::now()), None);
    }

    #[test]
    fn a_cached_key_is_served_until_an_invalidation() {
        let cache = live();
        let p = principal();
        cache.insert(KeyHash([1; 32]), p.clone(), None, cache.generation());
        assert_eq!(cache.get(&KeyHash([1; 32]), Utc::now()), Some(p));
        assert_eq!(cache.get(&KeyHash([2; 32]), Utc::now()), None);
        cache.invalidate();
        assert_eq!(cache.get(&KeyHash([1; 32]), Utc::now()), None);
        assert_eq!(
            cache.stats(),
            KeyCacheStats {
                hits: 1,
                misses: 2,
                live: true
            }
        );
    }

    #[test]
    fn a_row_read_before_an_invalidation_is_not_cached_after_it() {
        let cache = live();
        let generation = cache.generation();
        // ... the database read happens here, and a revocation's notification arrives ...
        cache.invalidate();
        cache.insert(KeyHash([1; 32]), principal(), None, generation);
        assert_eq!(cache.get(&KeyHash([1; 32]), Utc::now()), None);
    }

    #[test]
    fn an_expired_key_is_not_served_from_the_cache() {
        let cache = live();
        let expires = Utc::now() + chrono::Duration::seconds(5);
        cache.insert(
            KeyHash([1; 32]),
            principal(),
            Some(expires),
            cache.generation(),
        );
        assert!(cache.get(&KeyHash([1; 32]), Utc::now()).is_some());
        assert_eq!(
            cache.get(&KeyHash([1; 32]), expires + chrono::Duration::seconds(1)),
            None
        );
    }

    #[test]
    fn losing_the_listen_connection_empties_the_cache() {
        let cache = live();
        cache.insert(KeyHash([1; 32]), principal(), None, cache.generation());
        cache.set_live(false);
        cache.set_live(true);
        assert_eq!(cache.get(&KeyHash([1; 32]), Utc::now()), None);
    }
}
