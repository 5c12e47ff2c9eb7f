//! Delivery bodies: posture's JSON envelope, a Slack Block Kit message or a Teams Adaptive
//! Card message, chosen by the subscription's type.
//!
//! The findings a chunk of events carries are read once, at the first attempt of any of its
//! deliveries, and kept as a [`snapshot`] (the findings as the API shows them) that every
//! subscription's delivery of the chunk shares. Each attempt renders its body from the
//! snapshot ([`render_snapshot`]): the same snapshot and delivery give the same bytes, so
//! every attempt sends (and signs) exactly what the first sent.

mod chat;
mod slack;
mod teams;

use posture_domain::{delivery::Delivery, finding::Finding, webhook::WebhookType};
use posture_wire::{findings::FindingResponse, webhooks::FindingEventBody};

/// The body of a delivery of `findings`. An error here is a bug (these types have no maps
/// with non-string keys and no fallible `Serialize`), but it is returned, never papered over
/// with an empty body that would be signed and sent.
pub fn render(
    webhook_type: WebhookType,
    delivery: &Delivery,
    findings: Vec<Finding>,
) -> Result<Vec<u8>, serde_json::Error> {
    let findings: Vec<FindingResponse> = findings.into_iter().map(FindingResponse::from).collect();
    render_findings(webhook_type, delivery, findings)
}

/// The snapshot of `findings` a chunk's deliveries share: a JSON array of them as the API
/// shows them.
pub fn snapshot(findings: Vec<Finding>) -> Result<Vec<u8>, serde_json::Error> {
    let findings: Vec<FindingResponse> = findings.into_iter().map(FindingResponse::from).collect();
    serde_json::to_vec(&findings)
}

/// The body of a delivery of the findings of `snapshot` (what [`snapshot`] wrote). An error
/// means the snapshot is not one: the delivery cannot be sent.
pub fn render_snapshot(
    webhook_type: WebhookType,
    delivery: &Delivery,
    snapshot: &[u8],
) -> Result<Vec<u8>, serde_json::Error> {
    let findings: Vec<FindingResponse> = serde_json::from_slice(snapshot)?;
    render_findings(webhook_type, delivery, findings)
}

fn render_findings(
    webhook_type: WebhookType,
    delivery: &Delivery,
    findings: Vec<FindingResponse>,
) -> Result<Vec<u8>, serde_json::Error> {
    match webhook_type {
        WebhookType::Generic => serde_json::to_vec(&FindingEventBody::new(delivery, findings)),
        WebhookType::Slack => serde_json::to_vec(&slack::message(delivery, &findings)),
        WebhookType::Teams => serde_json::to_vec(&teams::message(delivery, &findings)),
    }
}

#[cfg(test)]
mod hostile;
