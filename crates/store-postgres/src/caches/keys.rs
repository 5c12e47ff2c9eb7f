//! The authenticated-key cache: a request with a known key costs no database round trip,
//! and a revocation still takes effect on the next request.
//!
//! A trigger on `api_keys` (migration 4) sends `NOTIFY posture_keys` whenever a key's
//! revocation, expiry, scopes or owner change, or a key is deleted. Each serving process
//! holds one `LISTEN` connection (`listen.rs`, started by `PgStore::start_key_cache`) and empties its cache on
//! every notification. Entries are served only while that connection is known to be
//! current: every `PING_EVERY` it runs `SELECT 1`, and once the answer is in, every
//! notification of a change committed before the query was sent has been received (the
//! server sends pending notifications before it answers). Each answer makes the cache
//! servable until [`FRESH_FOR`] after its query was sent; a connection that dies, or stalls
//! without dying (a frozen proxy, a half-open TCP connection), stops the cache within that
//! bound, and every request reads the database, as without a cache, until the connection
//! answers again. Four more rules keep it exact:
//!
//! - A lookup caches its result only if no invalidation happened since it started (the
//!   generation counter), so a row read just before a revocation is never cached after it.
//! - Expiry is checked on every hit; entries also age out after [`MAX_AGE`] as a backstop.
//! - A key found unknown (or revoked, or expired) is remembered as unknown for
//!   [`UNKNOWN_FOR`], in a list of at most [`MAX_REMEMBERED`] hashes (the oldest go first),
//!   so a client repeating a bad key costs no query; any key change forgets them all. A new
//!   key cannot be affected: its 160 random bits were never presented before it was issued.
//! - A key found valid is remembered as recently valid for [`RECENT_FOR`] (same bound),
//!   whatever happens to the cache: such a key is always looked up when not served from
//!   memory, even from an address out of budget (see the gate in `posture-http`). It grants
//!   nothing by itself.

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use posture_domain::{KeyHash, Principal, ports::KnownKey};

use super::versions::{self, ReadVersion, Reader, VersionLookups};

/// The channel the `api_keys` trigger notifies.
pub(super) const CHANNEL: &str = "posture_keys";
/// The `application_name` of the `LISTEN` connection, as `pg_stat_activity` shows it.
pub const APPLICATION_NAME: &str = "posture key cache";
/// Longest an entry is served without reading the database again.
const MAX_AGE: Duration = Duration::from_secs(60);
/// Notifications of changed data held for waiting requests that have not looked yet (one
/// that falls further behind re-reads, as after any change).
const CHANGES_BUFFER: usize = 1024;
/// Entries kept at most; the cache starts over when full.
const MAX_ENTRIES: usize = 10_000;
/// How long a key found unknown is answered from memory.
const UNKNOWN_FOR: Duration = Duration::from_secs(30);
/// How long a key found valid counts as recently valid.
const RECENT_FOR: Duration = Duration::from_secs(24 * 3600);
/// Unknown keys, and recently valid keys, remembered at most (each).
const MAX_REMEMBERED: usize = 10_000;
/// How often the `LISTEN` connection is checked.
pub(super) const PING_EVERY: Duration = Duration::from_millis(500);
/// How long a check may go unanswered before the connection is given up and replaced. The
/// cache stops being served [`FRESH_FOR`] after the last answered check whatever this is;
/// this only decides when to reconnect, so it is long: a database slow to answer under load
/// is waited for (the cache serves again as soon as a check is answered in time), where
/// giving up would add a reconnection to its load.
pub(super) const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// How long after a check's query was sent its answer lets the cache be served: the
/// longest a revocation can go unnoticed by a process whose `LISTEN` connection stalled.
const FRESH_FOR: Duration = Duration::from_millis(1500);
/// Pause before reconnecting a lost `LISTEN` connection.
pub(super) const RECONNECT_AFTER: Duration = Duration::from_secs(1);

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
    /// Keys answered as unknown from memory.
    pub unknown_hits: u64,
    /// Lookups that read the database.
    pub misses: u64,
    /// Whether entries are being served (the `LISTEN` connection is up).
    pub live: bool,
    /// Data-version lookups of the primary (`[0]`) and of the read replicas (`[1]`).
    pub versions: [VersionLookups; 2],
}

/// Hashes remembered for `ttl`, at most [`MAX_REMEMBERED`], oldest first.
struct Remembered {
    ttl: Duration,
    order: VecDeque<([u8; 32], Instant)>,
    since: HashMap<[u8; 32], Instant>,
}

impl Remembered {
    fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            order: VecDeque::new(),
            since: HashMap::new(),
        }
    }

    fn contains(&self, hash: &KeyHash) -> bool {
        self.since
            .get(hash.as_bytes())
            .is_some_and(|at| at.elapsed() < self.ttl)
    }

    fn remove(&mut self, hash: &KeyHash) {
        // Its place in `order` goes when it reaches the front.
        self.since.remove(hash.as_bytes());
    }

    fn insert(&mut self, hash: &KeyHash) {
        let now = Instant::now();
        while self.order.len() >= MAX_REMEMBERED
            || self
                .order
                .front()
                .is_some_and(|(_, at)| at.elapsed() >= self.ttl)
        {
            let Some((old, at)) = self.order.pop_front() else {
                break;
            };
            if self.since.get(&old) == Some(&at) {
                self.since.remove(&old);
            }
        }
        self.order.push_back((hash.0, now));
        self.since.insert(hash.0, now);
    }

    fn clear(&mut self) {
        self.order.clear();
        self.since.clear();
    }
}

pub(crate) struct KeyCache {
    /// The origin of `fresh_until`.
    started: Instant,
    /// Microseconds after `started` until which entries may be served; 0 while the
    /// `LISTEN` connection is down.
    fresh_until: AtomicU64,
    generation: AtomicU64,
    entries: Mutex<HashMap<[u8; 32], Entry>>,
    unknown: Mutex<Remembered>,
    recent: Mutex<Remembered>,
    hits: AtomicU64,
    unknown_hits: AtomicU64,
    misses: AtomicU64,
    /// Customers' data versions, served under the same rule as the keys.
    versions: versions::DataVersions,
    /// Word of changed data to waiting feed requests.
    changes: tokio::sync::broadcast::Sender<Heard>,
}

impl Default for KeyCache {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            fresh_until: AtomicU64::default(),
            generation: AtomicU64::default(),
            entries: Mutex::default(),
            unknown: Mutex::new(Remembered::new(UNKNOWN_FOR)),
            recent: Mutex::new(Remembered::new(RECENT_FOR)),
            hits: AtomicU64::default(),
            unknown_hits: AtomicU64::default(),
            misses: AtomicU64::default(),
            versions: versions::DataVersions::default(),
            changes: tokio::sync::broadcast::channel(CHANGES_BUFFER).0,
        }
    }
}

impl KeyCache {
    fn entries(&self) -> MutexGuard<'_, HashMap<[u8; 32], Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn unknown(&self) -> MutexGuard<'_, Remembered> {
        self.unknown
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn recent(&self) -> MutexGuard<'_, Remembered> {
        self.recent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What the cache knows of a key.
    pub(crate) fn known(&self, hash: &KeyHash, now: DateTime<Utc>) -> KnownKey {
        let found = self.is_live().then(|| {
            let entries = self.entries();
            entries
                .get(hash.as_bytes())
                // The map found it by hash; confirm in constant time all the same.
                .filter(|e| e.hash == *hash)
                .filter(|e| e.cached_at.elapsed() < MAX_AGE)
                .filter(|e| e.expires_at.is_none_or(|at| at > now))
                .map(|e| e.principal.clone())
        });
        if let Some(principal) = found.flatten() {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return KnownKey::Valid(principal);
        }
        if self.unknown().contains(hash) {
            self.unknown_hits.fetch_add(1, Ordering::Relaxed);
            return KnownKey::Unknown;
        }
        if self.recent().contains(hash) {
            return KnownKey::Recent;
        }
        KnownKey::Unseen
    }

    /// Counts a lookup that reads the database.
    pub(crate) fn count_miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// Remembers that a key is no valid key (unless keys changed since `generation`).
    pub(crate) fn insert_unknown(&self, hash: &KeyHash, generation: u64) {
        self.recent().remove(hash);
        let mut unknown = self.unknown();
        if self.generation.load(Ordering::Acquire) == generation {
            unknown.insert(hash);
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
        self.recent().insert(&hash);
        if !self.is_live() {
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
        let mut unknown = self.unknown();
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.clear();
        unknown.clear();
    }

    /// Whether entries (keys and data versions) may be served: the `LISTEN` connection
    /// answered recently enough.
    pub(crate) fn is_live(&self) -> bool {
        let until = self.fresh_until.load(Ordering::Acquire);
        until != 0 && micros(self.started.elapsed()) < until
    }

    /// The `LISTEN` connection answered a query sent at `sent`: every notification of a
    /// change committed before then has been handled.
    pub(super) fn confirm(&self, sent: Instant) {
        let until = micros(sent.saturating_duration_since(self.started) + FRESH_FOR);
        self.fresh_until.fetch_max(until, Ordering::AcqRel);
    }

    /// A customer's cached data version and earliest unrecorded triage expiry, while the
    /// cache may be served and `reader` has the data it describes.
    pub(crate) fn data_version(
        &self,
        customer: uuid::Uuid,
        reader: Reader,
    ) -> Option<(u64, Option<chrono::DateTime<chrono::Utc>>)> {
        if !self.is_live() {
            self.versions.count_miss(reader);
            return None;
        }
        self.versions.get(customer, reader)
    }

    /// A customer's cached pass bound, under the rule of [`KeyCache::data_version`] (read
    /// with its data version: see `versions.rs`).
    pub(crate) fn synced_through(
        &self,
        customer: uuid::Uuid,
        reader: Reader,
    ) -> Option<Option<chrono::DateTime<chrono::Utc>>> {
        self.is_live()
            .then(|| self.versions.synced_through(customer, reader))
            .flatten()
    }

    /// The versions' generation, to hand back to [`KeyCache::insert_data_version`].
    pub(crate) fn data_generation(&self) -> u64 {
        self.versions.generation()
    }

    /// Caches a version and pass bound read from the primary (see
    /// [`versions::DataVersions::insert`]).
    pub(crate) fn insert_data_version(
        &self,
        customer: uuid::Uuid,
        read: ReadVersion,
        generation: u64,
    ) {
        if self.is_live() {
            self.versions.insert(customer, read, generation);
        }
    }

    /// A notification on `posture_data`: that customer's data changed.
    pub(super) fn data_changed(&self, payload: &str) {
        let customer = payload.parse::<uuid::Uuid>().ok();
        match customer {
            Some(customer) => self.versions.forget(customer),
            None => self.versions.clear(),
        }
        // Nobody waiting is no error.
        let _ = self.changes.send(Heard::now(customer));
    }

    /// The `LISTEN` connection (re)started, or ended: nothing cached so far can be trusted.
    pub(super) fn set_live(&self, live: bool) {
        self.invalidate();
        self.versions.clear();
        if live {
            self.confirm(Instant::now());
            let _ = self.changes.send(Heard::now(None));
        } else {
            self.fresh_until.store(0, Ordering::Release);
        }
    }

    /// Word of changed data from now on (`changes.rs`).
    pub(super) fn changes(&self) -> tokio::sync::broadcast::Receiver<Heard> {
        self.changes.subscribe()
    }

    pub(crate) fn stats(&self) -> KeyCacheStats {
        KeyCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            unknown_hits: self.unknown_hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            live: self.is_live(),
            versions: self.versions.lookups(),
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A notification as the waiters hear it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Heard {
    /// Whose data changed; `None` when any customer's may have changed unheard (the
    /// `LISTEN` connection restarted).
    pub(super) customer: Option<uuid::Uuid>,
    /// When it arrived: the commit it announces is visible to any read begun since.
    pub(super) at: Instant,
}

impl Heard {
    pub(super) fn now(customer: Option<uuid::Uuid>) -> Self {
        Self {
            customer,
            at: Instant::now(),
        }
    }
}

#[cfg(test)]
mod tests;
