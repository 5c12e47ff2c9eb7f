//! Hostile customer text through every renderer: generic JSON, Slack, Teams and CEF.
//!
//! Titles, descriptions and display names come from the analyzer, which reads them from the
//! customer's directory: anyone who can name a group can write them. Each renderer must
//! keep them text: no link, mention, markup, template or line of their own, and no control
//! character where the format has no escape for it.

use chrono::{TimeZone, Utc};
use posture_domain::{
    CustomerId, FindingId, IdentityId, PassId, WebhookId,
    delivery::{Delivery, DeliveryTrigger},
    finding::{Finding, FindingStatus, FindingType, Severity},
    identity::{IdentityKind, IdentitySummary},
    webhook::{EventType, WebhookType},
};
use posture_wire::{cef, findings::FindingResponse};
use serde_json::Value;

use super::render;

/// Every C0 and C1 control character, and the Unicode line and paragraph separators.
fn controls() -> String {
    (0u32..=0x9f)
        .filter_map(char::from_u32)
        .filter(|c| c.is_control())
        .chain(['\u{2028}', '\u{2029}'])
        .collect()
}

fn hostile() -> String {
    format!(
        "[click](https://evil.example) <@U123> <!channel> <at>Ada</at> **bold** _it_ \
         a|b \\ c = d {{{{DATE(2017-02-14T06:00:00Z, SHORT)}}}} <https://evil.example|x> \
         - item 1. two > quote # head `code` ~strike~ {}end",
        controls()
    )
}

fn finding() -> Finding {
    let tenant = "8f6e2c1a-3b4d-4e5f-9a0b-1c2d3e4f5a6b".parse().unwrap();
    Finding {
        triage: posture_domain::triage::Triage::default(),
        id: "f-1".parse::<FindingId>().unwrap(),
        cloud_tenant_id: tenant,
        finding_type: "tier0_permanent_root".parse::<FindingType>().unwrap(),
        severity: Severity::Critical,
        status: FindingStatus::Open,
        title: hostile(),
        description: Some(hostile()),
        identity: Some(IdentitySummary {
            id: "u-1".parse::<IdentityId>().unwrap(),
            display_name: hostile(),
            kind: IdentityKind::Group,
            cloud_tenant_id: tenant,
        }),
        detected_at: Utc.with_ymd_and_hms(2026, 11, 21, 6, 0, 0).unwrap(),
        updated_at: Utc.with_ymd_and_hms(2026, 11, 22, 6, 0, 0).unwrap(),
        modified_at: Utc.with_ymd_and_hms(2026, 11, 22, 6, 0, 0).unwrap(),
    }
}

fn delivery() -> Delivery {
    Delivery {
        pass_id: Some(PassId::generate()),
        ..Delivery::pending(
            (CustomerId::generate(), WebhookId::generate()),
            EventType::FindingCritical.into(),
            DeliveryTrigger::Event,
            vec!["f-1".parse().unwrap()],
            Utc.with_ymd_and_hms(2026, 11, 22, 6, 0, 0).unwrap(),
        )
    }
}

/// Every string of a JSON value.
fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().flat_map(strings).collect(),
        Value::Object(map) => map.values().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

fn rendered(kind: WebhookType) -> Value {
    let body = render(kind, &delivery(), vec![finding()]).unwrap();
    serde_json::from_slice(&body).unwrap()
}

#[test]
fn the_generic_body_carries_the_text_exactly() {
    let body = rendered(WebhookType::Generic);
    let finding = &body["data"]["findings"][0];
    assert_eq!(finding["title"], hostile().as_str());
    assert_eq!(finding["description"], hostile().as_str());
    assert_eq!(finding["identity"]["displayName"], hostile().as_str());
}

#[test]
fn slack_text_has_no_link_mention_or_control_character_of_the_customer() {
    let body = rendered(WebhookType::Slack);
    for text in strings(&body) {
        assert!(!text.contains('<') && !text.contains('>'), "{text:?}");
        // Structure lines are posture's own: `*Label*\nvalue` and `*title*\ndescription`.
        let controls = text.chars().filter(|c| c.is_control()).count();
        assert!(controls <= 1, "{text:?}");
    }
    let all = strings(&body).join(" ");
    assert!(all.contains("&lt;@U123&gt;") && all.contains("&lt;!channel&gt;"));
}

#[test]
fn teams_text_has_no_markdown_template_or_control_character_of_the_customer() {
    let body = rendered(WebhookType::Teams);
    let card = &body["attachments"][0]["content"]["body"];
    let texts = strings(card);
    let customer: Vec<&str> = texts
        .iter()
        .copied()
        .filter(|t| t.contains("click") || t.contains("item"))
        .collect();
    assert!(customer.len() >= 2, "title and identity: {customer:?}");
    for text in customer {
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(!text.contains("{{"), "a template: {text:?}");
        let chars: Vec<char> = text.chars().collect();
        for (i, c) in chars.iter().enumerate() {
            if "[]()*_`~<>|#-+!".contains(*c) {
                assert!(
                    i > 0 && chars[i - 1] == '\\',
                    "{c:?} unescaped at {i}: {text:?}"
                );
            }
        }
    }
}

#[test]
fn a_cef_line_has_no_control_character_and_parses_back() {
    let line = cef::line(&FindingResponse::from(finding()));
    assert!(!line.chars().any(char::is_control), "{line:?}");
    let (header, ext) = posture_test_support::cef::parse(&line).unwrap();
    assert_eq!(header.len(), 7);
    assert_eq!(header[6], "10");
    // The title in the header: line breaks and controls became spaces.
    assert!(header[5].starts_with("[click](https://evil.example) <@U123>"));
    assert!(header[5].ends_with("end"));
    // Extensions keep each of them apart and the `=` and `|` exactly.
    assert!(ext["cs4"].contains("a|b \\ c = d"), "{}", ext["cs4"]);
    assert!(ext["suser"].ends_with("end"));
    assert_eq!(ext["externalId"], "f-1");
    assert_eq!(ext["duid"], "u-1");
}

/// A body rendered from a chunk's snapshot is byte for byte the body rendered from the
/// findings themselves, for every format, hostile text, triage and sub-second times
/// included: the snapshot loses nothing a body shows.
#[test]
fn a_body_rendered_from_the_snapshot_is_the_body_rendered_from_the_findings() {
    let mut triaged = finding();
    triaged.id = "f-2".parse().unwrap();
    triaged.identity = None;
    triaged.description = None;
    triaged.modified_at = Utc.with_ymd_and_hms(2026, 11, 22, 6, 0, 0).unwrap()
        + chrono::Duration::nanoseconds(123_456_789);
    triaged.triage = posture_domain::triage::Triage {
        state: posture_domain::triage::TriageState::RiskAccepted,
        reason: Some(posture_domain::triage::TriageReason::CompensatingControl),
        comment: Some(format!("𝒜 {}", hostile())),
        expires_at: Some(Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()),
        updated_at: Some(Utc.with_ymd_and_hms(2026, 11, 23, 6, 0, 0).unwrap()),
        updated_by: Some(posture_domain::triage::TriageActor {
            key_id: posture_domain::KeyId::generate(),
            key_name: hostile(),
        }),
    };
    let findings = vec![finding(), triaged];
    let snapshot = super::snapshot(findings.clone()).unwrap();
    let delivery = delivery();
    for kind in [WebhookType::Generic, WebhookType::Slack, WebhookType::Teams] {
        let direct = render(kind, &delivery, findings.clone()).unwrap();
        let shared = super::render_snapshot(kind, &delivery, &snapshot).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&shared),
            String::from_utf8_lossy(&direct),
            "{kind:?}"
        );
    }
    assert!(super::render_snapshot(WebhookType::Generic, &delivery, b"{}").is_err());
}
