//! The events feed: every finding event of the customer's analyzer passes, oldest first,
//! kept for a retention period whether or not anyone subscribed to webhooks
//! (docs/api.md, "Events").
//!
//! An event is one finding and what happened to it in one pass: it is new (of its
//! severity), resolved, reopened, or its severity changed. Webhook deliveries announce the
//! same events by id, so the feed is where a consumer catches up after missed deliveries.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::{
    delivery::FindingChange,
    error::{Error, Refusal},
    finding::Finding,
    ids::{EventId, PassId},
    webhook::EventType,
};

/// Default days events are kept (`POSTURE_EVENT_RETENTION_DAYS`).
pub const DEFAULT_EVENT_RETENTION_DAYS: u32 = 30;

/// Longest a request may wait for the next events (`wait`, seconds).
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// Events per page: default and most.
pub const DEFAULT_EVENTS_LIMIT: u32 = 100;
pub const MAX_EVENTS_LIMIT: u32 = 500;

/// One event of the feed.
#[derive(Clone, Debug)]
pub struct FindingEvent {
    pub id: EventId,
    pub event_type: EventType,
    /// When its pass committed (the pass's time).
    pub created_at: DateTime<Utc>,
    pub pass_id: PassId,
    /// The finding, as the API shows it now (webhook bodies render it the same way).
    pub finding: Finding,
    /// A lifecycle event's change; `None` for a new finding.
    pub change: Option<FindingChange>,
}

/// Which events a feed request reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct EventFilter {
    /// Only these types (empty: every type).
    pub types: Vec<EventType>,
    /// Only events created at or after this time.
    pub created_since: Option<DateTime<Utc>>,
    /// Only events after this one (the last the reader saw).
    pub after: Option<EventId>,
    /// Events at most on the page.
    pub limit: u32,
}

impl EventFilter {
    /// Checks the page size: 1 to [`MAX_EVENTS_LIMIT`] (larger is clamped by the caller).
    pub fn validate(&self) -> Result<(), Error> {
        if self.limit == 0 || self.limit > MAX_EVENTS_LIMIT {
            return Err(Error::refused(
                Refusal::OutOfRange,
                "limit",
                format!("1 to {MAX_EVENTS_LIMIT}"),
            ));
        }
        Ok(())
    }
}

/// A page of the feed.
#[derive(Clone, Debug, Default)]
pub struct EventPage {
    pub events: Vec<FindingEvent>,
    /// Whether more events matching the filter exist after this page now.
    pub has_more: bool,
}
