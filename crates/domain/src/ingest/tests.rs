//! Rules of ingest lines: what parses, what is ignored, and what rejects a line (naming why).

use super::*;
use crate::finding::Severity;

const T1: &str = "8f6e2c1a-3b4d-4e5f-9a0b-1c2d3e4f5a6b";

fn finding(extra: &str) -> String {
    format!(
        r#"{{"type":"finding","id":"f1","cloudTenantId":"{T1}","findingType":"tier0_permanent_root","severity":"critical","status":"open","title":"t"{extra}}}"#
    )
}

#[test]
fn a_valid_finding_line_parses() {
    let parsed = parse_line(&finding(r#","identityId":"u1""#))
        .unwrap()
        .unwrap();
    assert!(parsed.unknown_fields.is_empty());
    let IngestItem::Finding(f) = parsed.item else {
        panic!("not a finding")
    };
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.identity_id.unwrap().as_str(), "u1");
}

#[test]
fn unknown_fields_are_ignored_and_named() {
    let parsed = parse_line(&finding(r#","analyzerInternal":{"x":1},"zScore":[1,2]"#))
        .unwrap()
        .unwrap();
    assert_eq!(parsed.unknown_fields, ["analyzerInternal", "zScore"]);
    let plain = parse_line(&finding("")).unwrap().unwrap();
    assert_eq!(parsed.item, plain.item, "unknown fields change nothing");
}

#[test]
fn every_record_type_counts_its_unknown_fields_but_not_its_type_tag() {
    let lines = [
        format!(r#"{{"type":"tenant","cloudTenantId":"{T1}","displayName":"T","extra":1}}"#),
        format!(
            r#"{{"type":"identity","id":"u1","cloudTenantId":"{T1}","kind":"user","displayName":"A","extra":1}}"#
        ),
        finding(r#","extra":1"#),
        format!(
            r#"{{"type":"roleRecommendation","id":"r1","identityId":"u1","cloudTenantId":"{T1}","currentRoles":["Owner"],"recommendedRole":{{"name":"Reader"}},"extra":1}}"#
        ),
        format!(
            r#"{{"type":"uprScore","identityId":"u1","cloudTenantId":"{T1}","score":5,"extra":1}}"#
        ),
    ];
    for line in lines {
        let parsed = parse_line(&line)
            .unwrap_or_else(|e| panic!("{line}: {e}"))
            .unwrap();
        assert_eq!(parsed.unknown_fields, ["extra"], "{line}");
    }
}

#[test]
fn a_known_field_with_a_bad_value_rejects_the_line_even_among_unknown_fields() {
    let line = finding(r#","newField":true"#).replace(r#""title":"t""#, r#""title":7"#);
    let err = parse_line(&line).unwrap_err().to_string();
    assert!(err.contains("invalid type"), "{err}");
}

#[test]
fn a_finding_type_posture_does_not_know_is_accepted_when_well_formed() {
    let line = finding("").replace("tier0_permanent_root", "oauth_consent_grant_v2");
    let parsed = parse_line(&line).unwrap().unwrap();
    let IngestItem::Finding(f) = parsed.item else {
        panic!("not a finding")
    };
    assert_eq!(f.finding_type.as_str(), "oauth_consent_grant_v2");
    assert!(!f.finding_type.is_known());
}

#[test]
fn a_malformed_finding_type_is_rejected_naming_the_rule() {
    for bad in ["Tier0", "tier0-root", "", "_x", &"a".repeat(65)] {
        let line = finding("").replace("tier0_permanent_root", bad);
        let err = parse_line(&line).unwrap_err().to_string();
        assert!(err.contains("findingType"), "{bad}: {err}");
    }
}

#[test]
fn blank_lines_are_skipped() {
    assert_eq!(parse_line("   ").unwrap(), None);
}

#[test]
fn an_unknown_type_is_rejected_naming_the_type() {
    let err = parse_line(r#"{"type":"alert","id":"x"}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("alert"), "{err}");
}

#[test]
fn a_missing_id_is_rejected() {
    let line =
        format!(r#"{{"type":"identity","cloudTenantId":"{T1}","kind":"user","displayName":"A"}}"#);
    let err = parse_line(&line).unwrap_err().to_string();
    assert!(err.contains("missing field `id`"), "{err}");
}

#[test]
fn a_wrong_severity_is_rejected_with_the_allowed_values() {
    let line = finding("").replace("\"critical\"", "\"urgent\"");
    let err = parse_line(&line).unwrap_err().to_string();
    assert_eq!(
        err,
        "unknown severity \"urgent\"; allowed: critical, high, medium, low"
    );
}

#[test]
fn a_score_above_100_is_rejected() {
    let line =
        format!(r#"{{"type":"uprScore","identityId":"u1","cloudTenantId":"{T1}","score":101}}"#);
    assert!(parse_line(&line).unwrap_err().to_string().contains("score"));
}

#[test]
fn nul_characters_are_rejected() {
    let line = finding("").replace(r#""title":"t""#, r#""title":"a\u0000b""#);
    assert!(parse_line(&line).unwrap_err().to_string().contains("NUL"));
}

#[test]
fn a_record_of_an_unconnected_tenant_is_rejected_with_its_line() {
    let mut pass = PassState::new([]);
    let parsed = parse_line(&finding("")).unwrap().unwrap();
    let err = pass.check(7, &parsed.item).unwrap_err();
    assert!(matches!(err, IngestError::Line { line: 7, .. }), "{err}");
}

#[test]
fn identity_references_may_point_forward() {
    let mut pass = PassState::new([T1.parse().unwrap()]);
    let f = parse_line(&finding(r#","identityId":"u1""#))
        .unwrap()
        .unwrap();
    pass.check(1, &f.item).unwrap();
    assert_eq!(
        pass.unresolved_references(),
        vec![("u1".parse().unwrap(), 1)]
    );
    let identity = format!(
        r#"{{"type":"identity","id":"u1","cloudTenantId":"{T1}","kind":"user","displayName":"A"}}"#
    );
    pass.check(2, &parse_line(&identity).unwrap().unwrap().item)
        .unwrap();
    assert!(pass.unresolved_references().is_empty());
}
