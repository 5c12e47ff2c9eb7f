//! Delivery bodies: posture's JSON envelope, a Slack Block Kit message or a Teams Adaptive
//! Card message, chosen by the subscription's type. A body is rendered once, at the first
//! attempt, and every attempt sends (and signs) the same bytes.

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
    match webhook_type {
        WebhookType::Generic => serde_json::to_vec(&FindingEventBody::new(delivery, findings)),
        WebhookType::Slack => serde_json::to_vec(&slack::message(delivery, &findings)),
        WebhookType::Teams => serde_json::to_vec(&teams::message(delivery, &findings)),
    }
}

#[cfg(test)]
mod hostile;
