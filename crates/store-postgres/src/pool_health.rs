//! Whether the pool's connections are suspect: set when a connection-class failure is seen
//! (`error.rs` classifies it), read by the pool's recycling (`store.rs`), which then checks
//! each connection with a query before handing it out, so a connection the server closed
//! is discarded even when its client has not noticed yet. In steady state reuse costs
//! nothing. One flag for the process: every pool reaches the same servers.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

/// When a connection-class failure was last seen (epoch milliseconds; 0: never).
static LAST_CONNECTION_FAILURE_MS: AtomicU64 = AtomicU64::new(0);
/// How long after such a failure pooled connections are checked before reuse.
const CHECK_AFTER_FAILURE: Duration = Duration::from_secs(30);

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Notes a connection-class failure now.
pub(crate) fn connection_failed() {
    LAST_CONNECTION_FAILURE_MS.store(epoch_ms(), Ordering::Relaxed);
}

/// Whether a connection-class failure happened in the last [`CHECK_AFTER_FAILURE`].
pub(crate) fn connections_suspect() -> bool {
    let last = LAST_CONNECTION_FAILURE_MS.load(Ordering::Relaxed);
    last != 0 && epoch_ms().saturating_sub(last) < CHECK_AFTER_FAILURE.as_millis() as u64
}
