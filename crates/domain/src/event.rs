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
    delivery::{ChangedField, FindingChange},
    error::{Error, Refusal},
    finding::Finding,
    ids::{EventId, PassId},
    triage::TriageState,
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

/// An event of a change to record: a lifecycle event of a pass, or a triage event of a
/// triage write or expiry. (A new finding's event is recorded from the findings table.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEvent {
    pub event_type: EventType,
    pub finding_id: String,
    pub change: FindingChange,
}

impl NewEvent {
    /// The lifecycle event of a pass's `change` to a finding, if it is one: its status
    /// became resolved (`finding_resolved`), suppressed (`finding_suppressed`) or open again
    /// (`finding_reopened`), or its severity changed (`finding_severity_changed`). A change
    /// back to where the finding started, or of another field, is none.
    pub fn lifecycle(finding_id: &str, change: FindingChange) -> Option<Self> {
        if change.from == change.to {
            return None;
        }
        let event_type = match (change.field, change.to.as_str()) {
            (ChangedField::Status, "resolved") => EventType::FindingResolved,
            (ChangedField::Status, "suppressed") => EventType::FindingSuppressed,
            (ChangedField::Status, "open") => EventType::FindingReopened,
            (ChangedField::Severity, _) => EventType::FindingSeverityChanged,
            _ => return None,
        };
        Some(Self {
            event_type,
            finding_id: finding_id.to_owned(),
            change,
        })
    }

    /// A triage event (`finding_triaged`, `finding_triage_expired`) of a finding whose
    /// triage state went `from` `to`.
    pub fn triage(
        event_type: EventType,
        finding_id: &str,
        from: TriageState,
        to: TriageState,
    ) -> Self {
        Self {
            event_type,
            finding_id: finding_id.to_owned(),
            change: FindingChange {
                field: ChangedField::TriageState,
                from: from.as_str().to_owned(),
                to: to.as_str().to_owned(),
            },
        }
    }

    /// The change as it is stored and sent: `{"field", "from", "to"}`, the one place its
    /// JSON is written.
    pub fn change_json(&self) -> String {
        serde_json::json!({
            "field": self.change.field.as_str(),
            "from": self.change.from,
            "to": self.change.to,
        })
        .to_string()
    }

    /// The order in which a pass numbers its events: by type (its wire name), then finding.
    pub fn numbering_order(&self) -> (&'static str, &str) {
        (self.event_type.as_str(), &self.finding_id)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn change(field: ChangedField, from: &str, to: &str) -> FindingChange {
        FindingChange {
            field,
            from: from.to_owned(),
            to: to.to_owned(),
        }
    }

    #[test]
    fn a_pass_change_is_the_lifecycle_event_its_field_and_new_value_name() {
        let event = |field, from, to| {
            NewEvent::lifecycle("f1", change(field, from, to)).map(|e| e.event_type)
        };
        use ChangedField::{Severity, Status};
        assert_eq!(
            event(Status, "open", "resolved"),
            Some(EventType::FindingResolved)
        );
        assert_eq!(
            event(Status, "open", "suppressed"),
            Some(EventType::FindingSuppressed)
        );
        assert_eq!(
            event(Status, "resolved", "open"),
            Some(EventType::FindingReopened)
        );
        assert_eq!(
            event(Severity, "low", "high"),
            Some(EventType::FindingSeverityChanged)
        );
        assert_eq!(event(Status, "open", "open"), None, "no change, no event");
        assert_eq!(
            event(Status, "open", "in_progress"),
            None,
            "not a lifecycle change"
        );
        assert_eq!(
            event(ChangedField::TriageState, "untriaged", "risk_accepted"),
            None
        );
    }

    #[test]
    fn a_change_is_written_as_field_from_and_to() {
        let event = NewEvent::triage(
            EventType::FindingTriaged,
            "f1",
            TriageState::Untriaged,
            TriageState::RiskAccepted,
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&event.change_json()).unwrap(),
            serde_json::json!({"field": "triageState", "from": "untriaged", "to": "risk_accepted"})
        );
        assert_eq!(event.numbering_order(), ("finding_triaged", "f1"));
    }
}
