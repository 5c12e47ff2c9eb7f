//! Customers' data versions (for conditional requests), cached beside the keys and kept
//! exact the same way: a pass, a webhook change or a tenant change bumps the version in its
//! transaction and notifies `posture_data` with the customer's id (delivered at commit);
//! the `LISTEN` connection forgets that customer's version. Versions are served from memory
//! only while the connection is current (the key cache's rule), and a version read from the
//! database is cached only if nothing was forgotten while it was read.
//!
//! Each version is kept with the customer's pass bound (`customers.synced_through`), read
//! in the same statement: a pass moves the bound and bumps the version in one transaction,
//! so both are forgotten together, and a list reports the bound from memory instead of
//! reading it with every page. So is the customer's earliest triage expiry not recorded yet:
//! until it passes, the version alone tags the reads (see `data_versions.rs`).
//!
//! The versions also serve the read replicas, which cannot `LISTEN` (a hot standby refuses
//! it): each is kept with the primary's WAL position at its read (its insert position, at
//! or past the commit of every change the read saw), and a replica takes a version only once
//! it has replayed that position. So a replica never tags, or bounds a sync with, data it
//! does not have yet; until then it reads its own.

use std::{
    collections::HashMap,
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The channel the version bumps notify.
pub(crate) const DATA_CHANNEL: &str = "posture_data";
/// Longest a version is served without reading the database again (a backstop).
const MAX_AGE: Duration = Duration::from_secs(60);
/// Customers whose version is kept at most; the map starts over when full.
const MAX_ENTRIES: usize = 10_000;

/// A customer's data version, pass bound and earliest unrecorded triage expiry, the
/// primary's WAL position when they were read, and when.
#[derive(Clone, Copy)]
struct Entry {
    version: u64,
    synced_through: Option<DateTime<Utc>>,
    next_expiry: Option<DateTime<Utc>>,
    position: u64,
    read_at: Instant,
}

/// A version and pass bound as read from the primary, with the customer's earliest triage
/// expiry not recorded yet and the WAL position (an LSN as a number) at the read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ReadVersion {
    pub(crate) version: u64,
    pub(crate) synced_through: Option<DateTime<Utc>>,
    pub(crate) next_expiry: Option<DateTime<Utc>>,
    pub(crate) position: u64,
}

/// Who asks: the primary, whose versions these are, or a replica that has replayed the
/// primary's WAL up to a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reader {
    Primary,
    Replica { replayed: u64 },
}

impl Reader {
    fn may_take(self, entry: &Entry) -> bool {
        match self {
            Reader::Primary => true,
            Reader::Replica { replayed } => entry.position <= replayed,
        }
    }

    fn index(self) -> usize {
        match self {
            Reader::Primary => 0,
            Reader::Replica { .. } => 1,
        }
    }
}

/// Data-version lookups of one kind of reader: answered from memory, or read from its
/// database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VersionLookups {
    pub hits: u64,
    pub misses: u64,
}

#[derive(Default)]
pub(crate) struct DataVersions {
    generation: AtomicU64,
    entries: Mutex<HashMap<Uuid, Entry>>,
    /// By [`Reader::index`].
    hits: [AtomicU64; 2],
    misses: [AtomicU64; 2],
}

impl DataVersions {
    fn entries(&self) -> MutexGuard<'_, HashMap<Uuid, Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn fresh(&self, customer: Uuid, reader: Reader) -> Option<Entry> {
        self.entries()
            .get(&customer)
            .filter(|entry| entry.read_at.elapsed() < MAX_AGE && reader.may_take(entry))
            .copied()
    }

    /// The cached version of `customer` and its earliest unrecorded triage expiry, if fresh
    /// and `reader` has the data it describes (counted as a hit or a miss of `reader`).
    pub(crate) fn get(
        &self,
        customer: Uuid,
        reader: Reader,
    ) -> Option<(u64, Option<DateTime<Utc>>)> {
        let version = self
            .fresh(customer, reader)
            .map(|entry| (entry.version, entry.next_expiry));
        match version {
            Some(_) => self.hits[reader.index()].fetch_add(1, Ordering::Relaxed),
            None => self.misses[reader.index()].fetch_add(1, Ordering::Relaxed),
        };
        version
    }

    /// The cached pass bound of `customer` (itself `None` before its first pass), if fresh
    /// and `reader` has the data it bounds.
    pub(crate) fn synced_through(
        &self,
        customer: Uuid,
        reader: Reader,
    ) -> Option<Option<DateTime<Utc>>> {
        self.fresh(customer, reader)
            .map(|entry| entry.synced_through)
    }

    /// Counts a lookup of `reader` that was not answered from memory.
    pub(crate) fn count_miss(&self, reader: Reader) {
        self.misses[reader.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// The lookups of the primary and of the replicas, so far.
    pub(crate) fn lookups(&self) -> [VersionLookups; 2] {
        [0, 1].map(|i| VersionLookups {
            hits: self.hits[i].load(Ordering::Relaxed),
            misses: self.misses[i].load(Ordering::Relaxed),
        })
    }

    /// The generation to hand back to [`DataVersions::insert`] after reading the database.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Caches a version and pass bound read from the database, unless a version was
    /// forgotten since `generation` was taken (the read may predate the bump).
    pub(crate) fn insert(&self, customer: Uuid, read: ReadVersion, generation: u64) {
        let mut entries = self.entries();
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(
            customer,
            Entry {
                version: read.version,
                synced_through: read.synced_through,
                next_expiry: read.next_expiry,
                position: read.position,
                read_at: Instant::now(),
            },
        );
    }

    /// Forgets one customer's version (its data changed).
    pub(crate) fn forget(&self, customer: Uuid) {
        let mut entries = self.entries();
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.remove(&customer);
    }

    /// Forgets every version (notifications may have been missed).
    pub(crate) fn clear(&self) {
        let mut entries = self.entries();
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRIMARY: Reader = Reader::Primary;

    fn read(version: u64, synced_through: Option<DateTime<Utc>>, position: u64) -> ReadVersion {
        ReadVersion {
            version,
            synced_through,
            next_expiry: None,
            position,
        }
    }

    #[test]
    fn a_version_read_before_a_bump_is_not_cached_after_it() {
        let versions = DataVersions::default();
        let customer = Uuid::new_v4();
        let generation = versions.generation();
        versions.forget(customer);
        versions.insert(customer, read(3, None, 10), generation);
        assert_eq!(versions.get(customer, PRIMARY), None);
        assert_eq!(versions.synced_through(customer, PRIMARY), None);
        let through = Some(Utc::now());
        versions.insert(customer, read(4, through, 11), versions.generation());
        assert_eq!(versions.get(customer, PRIMARY), Some((4, None)));
        assert_eq!(versions.synced_through(customer, PRIMARY), Some(through));
        versions.forget(customer);
        assert_eq!(versions.get(customer, PRIMARY), None);
        assert_eq!(versions.synced_through(customer, PRIMARY), None);
    }

    #[test]
    fn a_replica_takes_a_version_only_once_it_replayed_its_position() {
        let versions = DataVersions::default();
        let customer = Uuid::new_v4();
        let through = Some(Utc::now());
        versions.insert(customer, read(7, through, 1_000), versions.generation());
        let behind = Reader::Replica { replayed: 999 };
        assert_eq!(versions.get(customer, behind), None);
        assert_eq!(versions.synced_through(customer, behind), None);
        for replayed in [1_000, 5_000] {
            let reader = Reader::Replica { replayed };
            assert_eq!(versions.get(customer, reader), Some((7, None)));
            assert_eq!(versions.synced_through(customer, reader), Some(through));
        }
        assert_eq!(versions.get(customer, PRIMARY), Some((7, None)));
        assert_eq!(
            versions.lookups(),
            [
                VersionLookups { hits: 1, misses: 0 },
                VersionLookups { hits: 2, misses: 1 }
            ]
        );
    }
}
