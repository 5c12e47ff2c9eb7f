//! Findings as ArcSight CEF (version 0) lines, one finding per line.
//!
//! ```text
//! CEF:0|Posture|posture-api|<version>|<findingType>|<title>|<severity>|<extension>
//! ```
//!
//! Header fields escape `\` and `|` with a backslash and carry no line breaks (CR and LF
//! become spaces). Extension values escape `\` and `=` and encode line breaks as `\n` (CR LF,
//! CR, LF, NEL and the Unicode line and paragraph separators alike). CEF has no escape for
//! other control characters: every other C0 and C1 control character (tab, NUL, ESC, DEL...)
//! and every invisible format character (zero-width, bidirectional controls such as U+202E)
//! becomes a space, in the header and in extension values, so a line holds no control
//! character at all and reads as it is. Severity: critical 10, high 8, medium 5, low 3. Extension keys, in this
//! order (absent values are left out): `rt` (detection time, epoch ms), `end` (last report,
//! epoch ms), `externalId` (finding id), `act` (status), `cat` (finding type), `cs1` tenant,
//! `cs2` identity kind, `cs3` severity (word), `cs4` title (exact, line breaks encoded),
//! `suser` (identity display name), `duid` (identity id), `cs5` triage state, `cs6` triage
//! reason, `msg` (description), each `csN` preceded by its `csNLabel`.

use std::fmt::Write as _;

use posture_domain::finding::Severity;

use crate::findings::FindingResponse;

const VENDOR: &str = "Posture";
const PRODUCT: &str = "posture-api";

/// The CEF severity of a finding severity (within the ArcSight bands).
pub fn severity_number(severity: Severity) -> u8 {
    match severity {
        Severity::Critical => 10,
        Severity::High => 8,
        Severity::Medium => 5,
        Severity::Low => 3,
    }
}

/// Whether `c` ends a line (CR and CR LF are handled by the caller).
fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// Writes `text` escaping `special` with a backslash, a line break as `line_break`, and any
/// other control character as a space.
fn escaped(text: &str, special: char, line_break: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c == special => {
                out.push('\\');
                out.push(c);
            }
            c if is_line_break(c) => {
                if c == '\r' && chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push_str(line_break);
            }
            // Invisible format characters (bidirectional controls, zero-width) too: CEF has
            // no escape for them, and a bidirectional override would reorder the fields a
            // person reads.
            c if c.is_control() || posture_domain::outside::is_invisible(c) => out.push(' '),
            other => out.push(other),
        }
    }
    out
}

/// A header field: `\` and `|` escaped, line breaks and controls replaced by spaces.
fn header(text: &str) -> String {
    escaped(text, '|', " ")
}

/// An extension value: `\` and `=` escaped, line breaks encoded as `\n`, other controls
/// replaced by spaces.
fn value(text: &str) -> String {
    escaped(text, '=', "\\n")
}

/// One CEF line (without its line break) for a finding.
pub fn line(finding: &FindingResponse) -> String {
    let mut out = format!(
        "CEF:0|{VENDOR}|{PRODUCT}|{}|{}|{}|{}|",
        header(env!("CARGO_PKG_VERSION")),
        header(finding.finding_type.as_str()),
        header(&finding.title),
        severity_number(finding.severity)
    );
    let mut fields: Vec<(&str, String)> = vec![
        ("rt", finding.detected_at.timestamp_millis().to_string()),
        ("end", finding.updated_at.timestamp_millis().to_string()),
        ("externalId", finding.id.clone()),
        ("act", finding.status.as_str().to_owned()),
        ("cat", finding.finding_type.as_str().to_owned()),
        ("cs1Label", "tenant".to_owned()),
        ("cs1", finding.cloud_tenant_id.to_string()),
    ];
    if let Some(identity) = &finding.identity {
        fields.push(("cs2Label", "identityKind".to_owned()));
        fields.push(("cs2", identity.kind.as_str().to_owned()));
    }
    fields.push(("cs3Label", "severity".to_owned()));
    fields.push(("cs3", finding.severity.as_str().to_owned()));
    fields.push(("cs4Label", "title".to_owned()));
    fields.push(("cs4", finding.title.clone()));
    if let Some(identity) = &finding.identity {
        fields.push(("suser", identity.display_name.clone()));
        fields.push(("duid", identity.id.clone()));
    }
    fields.push(("cs5Label", "triageState".to_owned()));
    fields.push(("cs5", finding.triage.state.as_str().to_owned()));
    if let Some(reason) = finding.triage.reason {
        fields.push(("cs6Label", "triageReason".to_owned()));
        fields.push(("cs6", reason.as_str().to_owned()));
    }
    if let Some(description) = &finding.description {
        fields.push(("msg", description.clone()));
    }
    for (i, (key, text)) in fields.iter().enumerate() {
        let separator = if i == 0 { "" } else { " " };
        let _ = write!(out, "{separator}{key}={}", value(text));
    }
    out
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use posture_domain::{
        finding::{FindingStatus, FindingType},
        identity::IdentityKind,
    };

    use super::*;
    use crate::identities::IdentitySummaryResponse;

    fn finding(title: &str, description: &str) -> FindingResponse {
        FindingResponse {
            id: "f-1".into(),
            cloud_tenant_id: "8f6e2c1a-3b4d-4e5f-9a0b-1c2d3e4f5a6b".parse().unwrap(),
            finding_type: "tier0_permanent_root".parse::<FindingType>().unwrap(),
            severity: Severity::Critical,
            status: FindingStatus::Open,
            title: title.into(),
            description: Some(description.into()),
            identity: Some(IdentitySummaryResponse {
                id: "u-1".into(),
                display_name: "Ada = Admin".into(),
                kind: IdentityKind::User,
                cloud_tenant_id: "8f6e2c1a-3b4d-4e5f-9a0b-1c2d3e4f5a6b".parse().unwrap(),
            }),
            detected_at: Utc.with_ymd_and_hms(2026, 11, 21, 6, 0, 0).unwrap(),
            updated_at: Utc.with_ymd_and_hms(2026, 11, 22, 6, 0, 0).unwrap(),
            modified_at: Utc.with_ymd_and_hms(2026, 11, 22, 6, 0, 0).unwrap(),
            triage: posture_domain::triage::Triage::default().into(),
        }
    }

    #[test]
    fn a_line_has_the_cef_header_layout_and_the_severity_number() {
        let text = line(&finding("Permanent GA", "Standing access"));
        assert!(text.starts_with("CEF:0|Posture|posture-api|"), "{text}");
        let (header, ext) = posture_test_support::cef::parse(&text).unwrap();
        // CEF version, vendor, product, version, class id, name, severity.
        assert_eq!(&header[..3], ["0", "Posture", "posture-api"]);
        assert_eq!(header[4], "tier0_permanent_root");
        assert_eq!(header[5], "Permanent GA");
        assert_eq!(header[6], "10");
        assert_eq!(ext["rt"], "1795240800000");
        assert_eq!(ext["externalId"], "f-1");
        assert_eq!(ext["act"], "open");
        assert_eq!(ext["cs1Label"], "tenant");
        assert_eq!(ext["cs1"], "8f6e2c1a-3b4d-4e5f-9a0b-1c2d3e4f5a6b");
        assert_eq!(ext["suser"], "Ada = Admin");
        assert_eq!(ext["duid"], "u-1");
    }

    #[test]
    fn hostile_text_stays_on_one_line_and_parses_back_to_itself() {
        let title = "a|b\\c=d\r\ne\rf\ng";
        let description = "pipe | backslash \\ equals = crlf \r\n cr \r lf \n end";
        let text = line(&finding(title, description));
        assert!(!text.contains('\n') && !text.contains('\r'), "{text:?}");
        let (header, ext) = posture_test_support::cef::parse(&text).unwrap();
        assert_eq!(
            header[5], "a|b\\c=d e f g",
            "line breaks become spaces in the header"
        );
        assert_eq!(
            ext["cs4"], "a|b\\c=d\ne\nf\ng",
            "the exact title, line breaks encoded"
        );
        assert_eq!(
            ext["msg"],
            "pipe | backslash \\ equals = crlf \n cr \n lf \n end"
        );
    }

    #[test]
    fn invisible_and_separator_characters_never_reach_a_line() {
        let title = "Admin\u{202e}nimda\u{200b}x\u{2028}y\u{2029}z\u{85}w";
        let text = line(&finding(title, "d\u{feff}e"));
        let (header, ext) = posture_test_support::cef::parse(&text).unwrap();
        assert_eq!(header[5], "Admin nimda x y z w");
        assert_eq!(ext["cs4"], "Admin nimda x\ny\nz\nw");
        assert_eq!(ext["msg"], "d e");
        assert!(
            !text.chars().any(posture_domain::outside::is_invisible),
            "{text:?}"
        );
    }

    #[test]
    fn severities_map_to_10_8_5_3() {
        let numbers: Vec<u8> = Severity::ALL.iter().map(|s| severity_number(*s)).collect();
        assert_eq!(numbers, vec![10, 8, 5, 3]);
    }
}
