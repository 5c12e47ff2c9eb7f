//! What the chat messages (Slack, Teams) share: their headline, where they say a delivery
//! came from, and customer text made fit for one line or a length.

use posture_domain::{
    delivery::{Delivery, DeliveryEvent, DeliveryTrigger},
    webhook::EventType,
};

/// "3 new critical findings", "3 findings resolved"; a test says so ("test: 1 new
/// critical finding"), and a ping says the receiver is connected.
pub(super) fn headline(delivery: &Delivery, count: usize) -> String {
    let noun = if count == 1 { "finding" } else { "findings" };
    let text = match delivery.event_type {
        DeliveryEvent::Ping => return "test delivery: this receiver is connected".to_owned(),
        DeliveryEvent::Event(EventType::FindingResolved) => format!("{count} {noun} resolved"),
        DeliveryEvent::Event(EventType::FindingSuppressed) => format!("{count} {noun} suppressed"),
        DeliveryEvent::Event(EventType::FindingReopened) => format!("{count} {noun} reopened"),
        DeliveryEvent::Event(EventType::FindingSeverityChanged) => {
            format!("{count} {noun} changed severity")
        }
        DeliveryEvent::Event(EventType::FindingTriaged) => format!("{count} {noun} triaged"),
        DeliveryEvent::Event(EventType::FindingTriageExpired) => {
            format!("triage expired on {count} {noun}")
        }
        DeliveryEvent::Event(
            new @ (EventType::FindingCritical
            | EventType::FindingHigh
            | EventType::FindingMedium
            | EventType::FindingLow),
        ) => {
            let severity = new.severity().map_or("", |s| s.as_str());
            format!("{count} new {severity} {noun}")
        }
    };
    if delivery.trigger == DeliveryTrigger::Test {
        format!("test: {text}")
    } else {
        text
    }
}

/// Where a chat message says the delivery came from.
pub(super) fn origin(delivery: &Delivery) -> String {
    match delivery.pass_id {
        Some(pass) => format!("delivery {} · analyzer pass {pass}", delivery.id),
        None => format!("delivery {} · test", delivery.id),
    }
}

/// Customer text for a one-line place of a chat message: control characters (C0, DEL, C1,
/// line breaks and tabs included) and the Unicode line and paragraph separators become
/// spaces, so a title cannot add lines (and with them list items, quotes or headings).
pub(super) fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || c == '\u{2028}' || c == '\u{2029}' {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// Cuts `text` to at most `max` characters, marking the cut with an ellipsis.
pub(super) fn truncate(text: &str, max: usize) -> String {
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
    fn one_line_turns_every_control_character_into_a_space() {
        let every_control: String = (0u32..=0x9f)
            .filter_map(char::from_u32)
            .filter(|c| c.is_control())
            .chain(['\u{2028}', '\u{2029}'])
            .collect();
        let flat = one_line(&format!("a{every_control}b"));
        assert!(flat.starts_with('a') && flat.ends_with('b'));
        assert!(
            flat[1..flat.len() - 1].chars().all(|c| c == ' '),
            "{flat:?}"
        );
    }

    #[test]
    fn truncation_counts_characters_and_marks_the_cut() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("ééééé", 3), "éé…");
    }
}
