//! NDJSON lines (docs/export.md): one line per finding, ending in a line feed and holding no
//! other line feed or carriage return; the line read back as JSON is the finding, field by
//! field, compared with a value built here from the finding (not by its serializer).

use chrono::DateTime;
use posture_wire::ndjson::write_line;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::finding;

proptest! {
    #[test]
    fn a_finding_is_one_json_line_that_reads_back_to_its_fields(finding in finding()) {
        let mut out = Vec::new();
        write_line(&mut out, &finding).unwrap();
        prop_assert_eq!(out.last(), Some(&b'\n'));
        let body = &out[..out.len() - 1];
        prop_assert!(!body.contains(&b'\n') && !body.contains(&b'\r'));
        let mut read: Value = serde_json::from_slice(body).unwrap();
        // Times are RFC 3339: compare the instants, not the spelling.
        for (field, time) in [
            ("detectedAt", finding.detected_at),
            ("updatedAt", finding.updated_at),
            ("modifiedAt", finding.modified_at),
        ] {
            let text = read[field].take();
            let parsed = DateTime::parse_from_rfc3339(text.as_str().unwrap()).unwrap();
            prop_assert_eq!(parsed, time);
        }
        let identity = finding.identity.as_ref().map(|i| json!({
            "id": i.id, "displayName": i.display_name, "kind": i.kind.as_str(),
            "cloudTenantId": i.cloud_tenant_id,
        }));
        let expected = json!({
            "id": finding.id,
            "cloudTenantId": finding.cloud_tenant_id,
            "findingType": finding.finding_type.as_str(),
            "severity": finding.severity.as_str(),
            "status": finding.status.as_str(),
            "title": finding.title,
            "description": finding.description,
            "identity": identity,
            "detectedAt": null,
            "updatedAt": null,
            "modifiedAt": null,
            "triage": {
                "state": finding.triage.state.as_str(), "reason": null,
                "comment": finding.triage.comment, "expiresAt": null, "updatedAt": null,
                "updatedBy": null,
            },
        });
        prop_assert_eq!(read, expected);
    }
}
