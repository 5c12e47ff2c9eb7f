//! What a replica's store shares with its lag check: the primary's WAL position it has
//! replayed, and the versions being read from the primary for it.

use std::{
    collections::HashSet,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use uuid::Uuid;

/// What a replica's store shares with its lag check.
#[derive(Default)]
pub(crate) struct ReplayState {
    /// The primary's WAL position this replica has replayed, as last read (0: never read).
    replayed: AtomicU64,
    /// Customers whose version is being read from the primary.
    pub(crate) filling: Mutex<HashSet<Uuid>>,
}

impl ReplayState {
    /// Records the position the replica has replayed, as just read. (A store, not a
    /// maximum: a reading older than another only makes the replica take fewer versions.)
    pub(crate) fn replayed(&self, position: u64) {
        self.replayed.store(position, Ordering::Release);
    }

    /// The position last recorded.
    pub(crate) fn position(&self) -> u64 {
        AtomicU64::load(&self.replayed, Ordering::Acquire)
    }
}
