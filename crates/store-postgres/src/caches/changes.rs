//! Word of changed data as the key cache's `LISTEN` connection hears it (the `posture_data`
//! notification every pass sends at commit), for the requests waiting on the events feed
//! (`data_changes.rs` at the crate's root).

use std::time::Instant;

/// A notification as the waiters hear it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Heard {
    /// Whose data changed; `None` when any customer's may have changed unheard (the
    /// `LISTEN` connection restarted).
    pub(crate) customer: Option<uuid::Uuid>,
    /// When it arrived: the commit it announces is visible to any read begun since.
    pub(crate) at: Instant,
}

impl Heard {
    pub(crate) fn now(customer: Option<uuid::Uuid>) -> Self {
        Self {
            customer,
            at: Instant::now(),
        }
    }
}
