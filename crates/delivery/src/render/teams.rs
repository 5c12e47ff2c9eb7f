//! A Microsoft Teams message carrying an Adaptive Card (version 1.4, the version Teams
//! Workflows accept), for a Workflows "When a Teams webhook request is received" flow.
//!
//! The card has a title, one container per finding (title and a fact set) and a closing
//! line. Text blocks and fact values are markdown in Teams: customer strings are made one
//! line (control characters become spaces) and every character that opens a markdown
//! construct is escaped with a backslash, so a title cannot inject links, emphasis, lists
//! or headings. Teams refuses messages over about 28 KB: findings are added while the message stays
//! under [`MAX_BYTES`]; the rest are counted in the closing line.

use posture_domain::delivery::Delivery;
use posture_wire::findings::FindingResponse;
use serde_json::{Value, json};

use super::chat::{headline, one_line, origin, truncate};

/// The size budget of a message (Teams' limit is about 28 KB).
pub(crate) const MAX_BYTES: usize = 27_000;

/// Customer text for an Adaptive Card's markdown: one line, markdown characters escaped,
/// and `{{` broken with a zero-width space (Adaptive Cards expand `{{DATE(...)}}` and
/// `{{TIME(...)}}` in text).
pub(crate) fn escape(text: &str) -> String {
    let text = one_line(text);
    let mut out = String::with_capacity(text.len() + 8);
    let mut after_brace = false;
    for c in text.chars() {
        if c == '{' && after_brace {
            out.push('\u{200b}');
        }
        after_brace = c == '{';
        if matches!(
            c,
            '\\' | '*'
                | '_'
                | '['
                | ']'
                | '('
                | ')'
                | '~'
                | '`'
                | '#'
                | '>'
                | '<'
                | '-'
                | '+'
                | '!'
                | '|'
                | '.'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn container(finding: &FindingResponse) -> Value {
    let identity = finding.identity.as_ref().map_or_else(
        || "-".to_owned(),
        |i| escape(&format!("{} ({})", i.display_name, i.kind)),
    );
    json!({
        "type": "Container",
        "separator": true,
        "items": [
            {"type": "TextBlock", "text": truncate(&escape(&finding.title), 300), "weight": "Bolder", "wrap": true},
            {"type": "FactSet", "facts": [
                {"title": "Severity", "value": finding.severity.as_str()},
                {"title": "Status", "value": finding.status.as_str()},
                {"title": "Type", "value": finding.finding_type.as_str()},
                {"title": "Identity", "value": truncate(&identity, 200)},
                {"title": "Tenant", "value": finding.cloud_tenant_id},
                {"title": "Finding", "value": escape(&finding.id)},
            ]}
        ]
    })
}

fn envelope(body: Vec<Value>) -> Value {
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.4",
                "body": body
            }
        }]
    })
}

fn size(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |v| v.len())
}

pub(crate) fn message(delivery: &Delivery, findings: &[FindingResponse]) -> Value {
    let title = json!({"type": "TextBlock", "size": "Medium", "weight": "Bolder", "wrap": true,
                       "text": format!("posture: {}", headline(delivery, findings.len()))});
    let closing = |shown: usize| {
        let mut text = origin(delivery);
        text[..1].make_ascii_uppercase();
        if shown < findings.len() {
            text = format!("And {} more. {text}", findings.len() - shown);
        }
        json!({"type": "TextBlock", "text": text, "isSubtle": true, "wrap": true})
    };
    let mut body = vec![title];
    // Room for the closing line, whatever it says.
    let reserve = size(&closing(0)) + 64;
    let mut shown = 0;
    let mut used = size(&envelope(body.clone()));
    for finding in findings {
        let item = container(finding);
        let added = size(&item) + 1;
        if used + added + reserve > MAX_BYTES {
            break;
        }
        used += added;
        body.push(item);
        shown += 1;
    }
    body.push(closing(shown));
    envelope(body)
}
