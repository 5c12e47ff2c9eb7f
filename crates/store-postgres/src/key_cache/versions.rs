//! Customers' data versions (for conditional requests), cached beside the keys and kept
//! exact the same way: a pass, a webhook change or a tenant change bumps the version in its
//! transaction and notifies `posture_data` with the customer's id (delivered at commit);
//! the `LISTEN` connection forgets that customer's version. Versions are served from memory
//! only while the connection is current (the key cache's rule), and a version read from the
//! database is cached only if nothing was forgotten while it was read.

use std::{
    collections::HashMap,
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use uuid::Uuid;

/// The channel the version bumps notify.
pub(crate) const DATA_CHANNEL: &str = "posture_data";
/// Longest a version is served without reading the database again (a backstop).
const MAX_AGE: Duration = Duration::from_secs(60);
/// Customers whose version is kept at most; the map starts over when full.
const MAX_ENTRIES: usize = 10_000;

#[derive(Default)]
pub(crate) struct DataVersions {
    generation: AtomicU64,
    entries: Mutex<HashMap<Uuid, (u64, Instant)>>,
}

impl DataVersions {
    fn entries(&self) -> MutexGuard<'_, HashMap<Uuid, (u64, Instant)>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The cached version of `customer`, if fresh.
    pub(crate) fn get(&self, customer: Uuid) -> Option<u64> {
        self.entries()
            .get(&customer)
            .filter(|(_, at)| at.elapsed() < MAX_AGE)
            .map(|(version, _)| *version)
    }

    /// The generation to hand back to [`DataVersions::insert`] after reading the database.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Caches a version read from the database, unless a version was forgotten since
    /// `generation` was taken (the read may predate the bump).
    pub(crate) fn insert(&self, customer: Uuid, version: u64, generation: u64) {
        let mut entries = self.entries();
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(customer, (version, Instant::now()));
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
        versions.insert(customer, 3, generation);
        assert_eq!(versions.get(customer), None);
        versions.insert(customer, 4, versions.generation());
        assert_eq!(versions.get(customer), Some(4));
        versions.forget(customer);
        assert_eq!(versions.get(customer), None);
    }
}
