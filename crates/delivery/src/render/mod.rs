//! Delivery bodies: posture's JSON envelope, a Slack Block Kit message or a Teams Adaptive
//! Card message, chosen by the subscription's type. A body is rendered once, at the first
//! attempt, and every attempt sends (and signs) the same bytes.

mod slack;
mod teams;

use posture_domain::{delivery::Delivery, finding::Finding, webhook::WebhookType};
use posture_wire::{findings::FindingResponse, webhooks::FindingEventBody};

/// The body of a delivery of `findings`.
pub fn render(webhook_type: WebhookType, delivery: &Delivery, findings: Vec<Finding>) -> Vec<u8> {
    let findings: Vec<FindingResponse> = findings.into_iter().map(FindingResponse::from).collect();
    let value = match webhook_type {
        WebhookType::Generic => serde_json::to_value(FindingEventBody::new(delivery, findings)),
        WebhookType::Slack => Ok(slack::message(delivery, &findings)),
        WebhookType::Teams => Ok(teams::message(delivery, &findings)),
    };
    // Serialising these values cannot fail (no maps with non-string keys, no I/O).
    serde_json::to_vec(&value.unwrap_or_default()).unwrap_or_default()
}

/// "3 new critical findings".
fn headline(delivery: &Delivery, count: usize) -> String {
    let severity = delivery.event_type.severity();
    let noun = if count == 1 { "finding" } else { "findings" };
    format!("{count} new {severity} {noun}")
}

/// Cuts `text` to at most `max` characters, marking the cut with an ellipsis.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_characters_and_marks_the_cut() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("ééééé", 3), "éé…");
    }
}
