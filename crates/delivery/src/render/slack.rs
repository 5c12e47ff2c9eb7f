//! A Slack Block Kit message for an incoming webhook.
//!
//! `text` is the notification fallback; blocks: a header, one section per finding, and a
//! context line. Slack's limits are kept: at most 50 blocks (so at most 48 findings are
//! shown, the rest counted in the context line), header text at most 150 characters,
//! section text at most 3,000, field text at most 2,000. Customer strings are made one line
//! (control characters become spaces) and escaped for mrkdwn (`&`, `<`, `>`), so a title
//! cannot inject links, mentions or lines of its own.

use posture_domain::delivery::Delivery;
use posture_wire::findings::FindingResponse;
use serde_json::{Value, json};

use super::chat::{headline, one_line, origin, truncate};

const MAX_BLOCKS: usize = 50;

/// Customer text for mrkdwn: one line, and the three characters Slack treats as control
/// characters escaped (`<` opens links and mentions).
pub(crate) fn escape(text: &str) -> String {
    one_line(text)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn field(label: &str, value: &str) -> Value {
    json!({"type": "mrkdwn", "text": truncate(&format!("*{label}*\n{}", escape(value)), 2000)})
}

fn section(finding: &FindingResponse) -> Value {
    let mut text = format!("*{}*", escape(&truncate(&finding.title, 500)));
    if let Some(description) = &finding.description {
        text.push('\n');
        text.push_str(&escape(&truncate(description, 1500)));
    }
    let identity = finding.identity.as_ref().map_or_else(
        || "-".to_owned(),
        |i| format!("{} ({})", i.display_name, i.kind),
    );
    json!({
        "type": "section",
        "text": {"type": "mrkdwn", "text": truncate(&text, 3000)},
        "fields": [
            field("Severity", finding.severity.as_str()),
            field("Status", finding.status.as_str()),
            field("Type", finding.finding_type.as_str()),
            field("Identity", &identity),
            field("Tenant", &finding.cloud_tenant_id.to_string()),
            field("Finding", &finding.id),
        ]
    })
}

pub(crate) fn message(delivery: &Delivery, findings: &[FindingResponse]) -> Value {
    let headline = headline(delivery, findings.len());
    let shown = findings.len().min(MAX_BLOCKS - 2);
    let mut blocks = vec![
        json!({"type": "header", "text": {"type": "plain_text", "text": truncate(&headline, 150)}}),
    ];
    blocks.extend(findings[..shown].iter().map(section));
    let mut context = origin(delivery);
    if findings.len() > shown {
        context = format!("and {} more · {context}", findings.len() - shown);
    }
    blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]}));
    json!({"text": format!("posture: {headline}"), "blocks": blocks})
}
