//! The event types, declared here once: what a subscription listens to ([`EventType`]) and
//! what a delivery announces ([`DeliveryEvent`]: an event type, or a test `ping`).
//!
//! The rest follows from this list or is checked against it: the database's `CHECK`s on
//! `finding_events`, `webhook_subscriptions` and `webhook_deliveries` (a store test reads
//! them), the new-finding type a pass records for a severity (`'finding_' || severity` in
//! the fan-out's SQL, [`EventType::for_severity`]; a test below), and every renderer, test
//! sample and contract description, which match without a wildcard, so a new type does not
//! compile until each says what it is. ARCHITECTURE.md, "Adding an event type".

use crate::finding::Severity;

string_enum! {
    /// What a subscription is notified of: new findings of one severity, or (opt-in) changes
    /// of findings already known.
    pub enum EventType ("eventTypes") {
        FindingCritical = "finding_critical",
        FindingHigh = "finding_high",
        FindingMedium = "finding_medium",
        FindingLow = "finding_low",
        /// A known finding's status became `resolved`.
        FindingResolved = "finding_resolved",
        /// A resolved or suppressed finding is `open` again.
        FindingReopened = "finding_reopened",
        /// A known finding's severity changed.
        FindingSeverityChanged = "finding_severity_changed",
        /// A known finding's status became `suppressed`.
        FindingSuppressed = "finding_suppressed",
        /// A key changed a finding's triage (`PATCH /findings/{id}`, or the bulk triage).
        FindingTriaged = "finding_triaged",
        /// A finding's triage mark reached its `expiresAt`: it is `untriaged` again.
        FindingTriageExpired = "finding_triage_expired",
    }
}

impl EventType {
    pub fn for_severity(severity: Severity) -> Self {
        match severity {
            Severity::Critical => EventType::FindingCritical,
            Severity::High => EventType::FindingHigh,
            Severity::Medium => EventType::FindingMedium,
            Severity::Low => EventType::FindingLow,
        }
    }

    /// The severity of the new findings announced; `None` for a lifecycle event.
    pub fn severity(self) -> Option<Severity> {
        match self {
            EventType::FindingCritical => Some(Severity::Critical),
            EventType::FindingHigh => Some(Severity::High),
            EventType::FindingMedium => Some(Severity::Medium),
            EventType::FindingLow => Some(Severity::Low),
            EventType::FindingResolved
            | EventType::FindingReopened
            | EventType::FindingSeverityChanged
            | EventType::FindingSuppressed
            | EventType::FindingTriaged
            | EventType::FindingTriageExpired => None,
        }
    }
}

/// What a delivery announces: an event a subscription listens to, or a test `ping`. The
/// event types are [`EventType`]'s, declared there once; `ping` is the one a delivery adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeliveryEvent {
    /// An event a subscription listens to.
    Event(EventType),
    /// A test delivery without findings (`POST /webhooks/{id}/test`).
    Ping,
}

impl DeliveryEvent {
    /// Every value: each [`EventType`] in its order, then `ping`.
    pub const ALL: &'static [DeliveryEvent] = &{
        let mut all = [DeliveryEvent::Ping; EventType::ALL.len() + 1];
        let mut i = 0;
        while i < EventType::ALL.len() {
            all[i] = DeliveryEvent::Event(EventType::ALL[i]);
            i += 1;
        }
        all
    };

    /// The wire string of this value.
    pub const fn as_str(self) -> &'static str {
        match self {
            DeliveryEvent::Event(event) => event.as_str(),
            DeliveryEvent::Ping => "ping",
        }
    }

    /// The wire strings of every value, for error messages and schemas.
    pub fn allowed() -> Vec<&'static str> {
        Self::ALL.iter().map(|v| v.as_str()).collect()
    }

    /// The severity of the new findings announced (none for a lifecycle event or a ping).
    pub fn severity(self) -> Option<Severity> {
        self.subscribed().and_then(EventType::severity)
    }

    /// The subscribable event type this is (none for a ping).
    pub fn subscribed(self) -> Option<EventType> {
        match self {
            DeliveryEvent::Event(event) => Some(event),
            DeliveryEvent::Ping => None,
        }
    }
}

impl From<EventType> for DeliveryEvent {
    fn from(event: EventType) -> Self {
        DeliveryEvent::Event(event)
    }
}

impl crate::ClosedSet for DeliveryEvent {
    const WHAT: &'static str = "eventType";

    fn allowed() -> Vec<&'static str> {
        DeliveryEvent::allowed()
    }
}

impl std::str::FromStr for DeliveryEvent {
    type Err = crate::error::Error;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "ping" => Ok(DeliveryEvent::Ping),
            _ => s.parse().map(DeliveryEvent::Event).map_err(|_| {
                crate::error::Error::invalid(
                    <Self as crate::ClosedSet>::WHAT,
                    format!(
                        "unknown value {s:?}; allowed: {}",
                        Self::allowed().join(", ")
                    ),
                )
            }),
        }
    }
}

impl std::fmt::Display for DeliveryEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for DeliveryEvent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for DeliveryEvent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
        text.parse().map_err(|_| {
            serde::de::Error::custom(format!(
                "unknown eventType {text:?}; allowed: {}",
                Self::allowed().join(", ")
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_severity_s_new_finding_type_is_finding_and_the_severity_as_the_fan_out_writes_it() {
        for severity in Severity::ALL {
            let event = EventType::for_severity(*severity);
            assert_eq!(event.as_str(), format!("finding_{}", severity.as_str()));
            assert_eq!(event.severity(), Some(*severity));
        }
    }

    #[test]
    fn a_delivery_event_is_every_event_type_and_ping_each_read_back_from_its_string() {
        assert_eq!(DeliveryEvent::ALL.len(), EventType::ALL.len() + 1);
        assert_eq!(DeliveryEvent::ALL.last(), Some(&DeliveryEvent::Ping));
        for event in DeliveryEvent::ALL {
            assert_eq!(event.as_str().parse::<DeliveryEvent>().unwrap(), *event);
            let json = serde_json::to_string(event).unwrap();
            assert_eq!(
                serde_json::from_str::<DeliveryEvent>(&json).unwrap(),
                *event
            );
        }
        for event in EventType::ALL {
            assert_eq!(DeliveryEvent::from(*event).subscribed(), Some(*event));
        }
        assert_eq!(DeliveryEvent::Ping.subscribed(), None);
        assert!("ping".parse::<EventType>().is_err());
        let refused = "finding_sideways".parse::<DeliveryEvent>().unwrap_err();
        assert!(
            refused.to_string().contains("allowed: finding_critical"),
            "{refused}"
        );
        assert!(refused.to_string().contains("ping"), "{refused}");
    }
}
