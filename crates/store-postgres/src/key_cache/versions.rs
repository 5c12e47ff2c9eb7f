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
//! reading it with every page.

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

/// A customer's data version and pass bound, and when they were read.
#[derive(Clone, Copy)]
struct Entry {
    version: u64,
    synced_through: Option<DateTime<Utc>>,
    read_at: Instant,
}

#[derive(Default)]
pub(crate) struct DataVersions {
    generation: AtomicU64,
    entries: Mutex<HashMap<Uuid, Entry>>,
}

impl DataVersions {
    fn entries(&self) -> MutexGuard<'_, HashMap<Uuid, Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn fresh(&self, customer: Uuid) -> Option<Entry> {
        self.entries()
            .get(&customer)
            .filter(|entry| entry.read_at.elapsed() < MAX_AGE)
            .copied()
    }

    /// The cached version of `customer`, if fresh.
    pub(crate) fn get(&self, customer: Uuid) -> Option<u64> {
        self.fresh(customer).map(|entry| entry.version)
    }

    /// The cached pass bound of `customer` (itself `None` before its first pass), if fresh.
    pub(crate) fn synced_through(&self, customer: Uuid) -> Option<Option<DateTime<Utc>>> {
        self.fresh(customer).map(|entry| entry.synced_through)
    }

    /// The generation to hand back to [`DataVersions::insert`] after reading the database.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Caches a version and pass bound read from the database, unless a version was
    /// forgotten since `generation` was taken (the read may predate the bump).
    pub(crate) fn insert(
        &self,
        customer: Uuid,
        version: u64,
        synced_through: Option<DateTime<Utc>>,
        generation: u64,
    ) {
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
                version,
                synced_through,
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

    #[test]
    fn a_version_read_before_a_bump_is_not_cached_after_it() {
        let versions = DataVersions::default();
        let customer = Uuid::new_v4();
        let generation = versions.generation();
        versions.forget(customer);
        versions.insert(customer, 3, None, generation);
        assert_eq!(versions.get(customer), None);
        assert_eq!(versions.synced_through(customer), None);
        let through = Some(Utc::now());
        versions.insert(customer, 4, through, versions.generation());
        assert_eq!(versions.get(customer), Some(4));
        assert_eq!(versions.synced_through(customer), Some(through));
        versions.forget(customer);
        assert_eq!(versions.get(customer), None);
        assert_eq!(versions.synced_through(customer), None);
    }
}
