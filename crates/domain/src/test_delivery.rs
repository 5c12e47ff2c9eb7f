//! What a test delivery (`POST /webhooks/{id}/test`) carries: nothing for a ping, one
//! sample finding otherwise — marked as a sample in its id, type and title — with how it
//! changed for a lifecycle event.

use chrono::{DateTime, Utc};

use crate::{
    customer::CustomerScope,
    delivery::{ChangedField, Delivery, DeliveryEvent, DeliveryTrigger, FindingChange},
    finding::{Finding, FindingStatus, FindingType, Severity},
    ids::{CloudTenantId, WebhookId},
    webhook::EventType,
};

/// The finding a test delivery of a finding event type carries: marked as a sample in its
/// id, type and title, about no identity, in `tenant`.
pub fn sample_finding(severity: Severity, tenant: CloudTenantId, now: DateTime<Utc>) -> Finding {
    Finding {
        triage: crate::triage::Triage::default(),
        id: format!("sample-{severity}")
            .parse()
            .expect("a sample id is a finding id"),
        cloud_tenant_id: tenant,
        finding_type: "sample_test_delivery"
            .parse::<FindingType>()
            .expect("a sample type is a finding type"),
        severity,
        status: FindingStatus::Open,
        title: format!("Sample {severity} finding (test delivery)"),
        description: Some(
            "Sent by POST /webhooks/{id}/test: not a real finding. Real deliveries have the \
             same shape."
                .to_owned(),
        ),
        identity: None,
        detected_at: now,
        updated_at: now,
        modified_at: now,
    }
}

/// What a test delivery of `event` carries: nothing for a ping; one sample finding for a
/// new-finding event; one sample finding and how it changed for a lifecycle or triage
/// event.
pub fn test_sample(
    event: DeliveryEvent,
    tenant: CloudTenantId,
    now: DateTime<Utc>,
) -> (Vec<Finding>, Vec<FindingChange>) {
    let change = |field, from: &str, to: &str| FindingChange {
        field,
        from: from.to_owned(),
        to: to.to_owned(),
    };
    let (severity, status, change) = match event {
        DeliveryEvent::Ping => return (Vec::new(), Vec::new()),
        DeliveryEvent::Event(EventType::FindingResolved) => (
            Severity::High,
            FindingStatus::Resolved,
            Some(change(ChangedField::Status, "open", "resolved")),
        ),
        DeliveryEvent::Event(EventType::FindingSuppressed) => (
            Severity::High,
            FindingStatus::Suppressed,
            Some(change(ChangedField::Status, "open", "suppressed")),
        ),
        DeliveryEvent::Event(EventType::FindingReopened) => (
            Severity::High,
            FindingStatus::Open,
            Some(change(ChangedField::Status, "resolved", "open")),
        ),
        DeliveryEvent::Event(EventType::FindingSeverityChanged) => (
            Severity::High,
            FindingStatus::Open,
            Some(change(ChangedField::Severity, "medium", "high")),
        ),
        DeliveryEvent::Event(EventType::FindingTriaged) => {
            let finding = Finding {
                triage: crate::triage::Triage {
                    state: crate::triage::TriageState::Acknowledged,
                    comment: Some("Sample triage (test delivery)".to_owned()),
                    updated_at: Some(now),
                    ..crate::triage::Triage::default()
                },
                ..sample_finding(Severity::High, tenant, now)
            };
            let change = change(ChangedField::TriageState, "untriaged", "acknowledged");
            return (vec![finding], vec![change]);
        }
        DeliveryEvent::Event(EventType::FindingTriageExpired) => (
            Severity::High,
            FindingStatus::Open,
            Some(change(
                ChangedField::TriageState,
                "risk_accepted",
                "untriaged",
            )),
        ),
        DeliveryEvent::Event(
            new @ (EventType::FindingCritical
            | EventType::FindingHigh
            | EventType::FindingMedium
            | EventType::FindingLow),
        ) => (
            new.severity().unwrap_or(Severity::High),
            FindingStatus::Open,
            None,
        ),
    };
    let finding = Finding {
        status,
        ..sample_finding(severity, tenant, now)
    };
    (vec![finding], change.into_iter().collect())
}

/// A test delivery of `event` to subscription `subscription`, due `now`, and the findings it
/// carries (samples about no real tenant: the nil tenant id says so).
pub fn test_delivery(
    scope: CustomerScope,
    subscription: WebhookId,
    event: DeliveryEvent,
    now: DateTime<Utc>,
) -> (Delivery, Vec<Finding>) {
    let (findings, changes) = test_sample(event, CloudTenantId::from_uuid(uuid::Uuid::nil()), now);
    let delivery = Delivery {
        changes,
        ..Delivery::pending(
            (scope.customer_id(), subscription),
            event,
            DeliveryTrigger::Test,
            findings.iter().map(|f| f.id.clone()).collect(),
            now,
        )
    };
    (delivery, findings)
}
