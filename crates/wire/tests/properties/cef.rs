//! CEF lines (docs/export.md): one line per finding, no control character anywhere, and the
//! test-support parser (written from the CEF specification, not from the writer) reads every
//! field back: header text with line breaks and controls as spaces, extension values exact
//! but for line breaks (encoded `\n`) and other controls (spaces).

use posture_test_support::cef::parse;
use posture_wire::cef::{line, severity_number};
use proptest::prelude::*;

use crate::finding;

fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// What a text becomes: CR LF and every other line break as `line_break`, any other control
/// character as a space.
fn expected(text: &str, line_break: char) -> String {
    text.replace("\r\n", "\n")
        .chars()
        .map(|c| match c {
            c if is_line_break(c) => line_break,
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

proptest! {
    #[test]
    fn a_finding_is_one_cef_line_that_parses_back_to_its_fields(finding in finding()) {
        let text = line(&finding);
        prop_assert!(
            !text.chars().any(|c| c.is_control() || is_line_break(c)),
            "a control character or line break in {text:?}"
        );
        let (header, extension) = parse(&text).ok_or_else(|| TestCaseError::fail(format!("not CEF: {text:?}")))?;
        let severity = severity_number(finding.severity).to_string();
        let title_in_header = expected(&finding.title, ' ');
        let title = expected(&finding.title, '\n');
        prop_assert_eq!(
            header,
            vec![
                "0",
                "Posture",
                "posture-api",
                env!("CARGO_PKG_VERSION"),
                finding.finding_type.as_str(),
                &title_in_header,
                &severity,
            ]
        );
        let get = |key: &str| extension.get(key).map(String::as_str);
        let detected = finding.detected_at.timestamp_millis().to_string();
        let updated = finding.updated_at.timestamp_millis().to_string();
        prop_assert_eq!(get("rt"), Some(detected.as_str()));
        prop_assert_eq!(get("end"), Some(updated.as_str()));
        prop_assert_eq!(get("externalId"), Some(finding.id.as_str()));
        prop_assert_eq!(get("act"), Some(finding.status.as_str()));
        prop_assert_eq!(get("cat"), Some(finding.finding_type.as_str()));
        let tenant = finding.cloud_tenant_id.to_string();
        prop_assert_eq!(get("cs1"), Some(tenant.as_str()));
        prop_assert_eq!(get("cs3"), Some(finding.severity.as_str()));
        prop_assert_eq!(get("cs4"), Some(title.as_str()));
        prop_assert_eq!(get("cs5Label"), Some("triageState"));
        prop_assert_eq!(get("cs5"), Some(finding.triage.state.as_str()));
        prop_assert_eq!(get("cs6"), finding.triage.reason.map(|r| r.as_str()));
        let description = finding.description.as_deref().map(|d| expected(d, '\n'));
        prop_assert_eq!(get("msg"), description.as_deref());
        match &finding.identity {
            Some(identity) => {
                prop_assert_eq!(get("cs2"), Some(identity.kind.as_str()));
                let name = expected(&identity.display_name, '\n');
                prop_assert_eq!(get("suser"), Some(name.as_str()));
                prop_assert_eq!(get("duid"), Some(identity.id.as_str()));
            }
            None => {
                prop_assert!(get("cs2").is_none() && get("suser").is_none() && get("duid").is_none());
            }
        }
    }
}
