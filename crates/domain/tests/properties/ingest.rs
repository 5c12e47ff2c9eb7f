//! Ingest lines (docs/ingest.md): any line parses or is rejected with a reason; a valid
//! record parses to its values; unknown fields change nothing but are named; a known field
//! with a value of the wrong type always rejects the line.

use posture_domain::ingest::{IngestItem, MAX_LINE_BYTES, MAX_TITLE_LEN, ParsedLine};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::json::{any_json, hostile_string};

/// A line parsed, its refusal as the text a pass reports.
fn parse(line: &str) -> Result<Option<ParsedLine>, String> {
    posture_domain::ingest::parse_line(line).map_err(|e| e.to_string())
}

const TYPES: [&str; 5] = [
    "tenant",
    "identity",
    "finding",
    "roleRecommendation",
    "uprScore",
];

/// Every field name the format defines (docs/ingest.md, "Lines").
const KNOWN_FIELDS: [&str; 20] = [
    "id",
    "cloudTenantId",
    "displayName",
    "primaryDomain",
    "kind",
    "principalName",
    "roleAssignments",
    "findingType",
    "severity",
    "status",
    "title",
    "description",
    "identityId",
    "detectedAt",
    "currentRoles",
    "recommendedRole",
    "removedActions",
    "score",
    "factors",
    "recordedAt",
];

/// A rejected line's reason: not empty, and bounded by the line it explains.
fn check_reason(line: &str, reason: &str) -> Result<(), TestCaseError> {
    prop_assert!(!reason.is_empty(), "an empty reason for {line:?}");
    prop_assert!(
        reason.len() <= 4 * line.len() + 1024,
        "a reason of {} bytes for a line of {}",
        reason.len(),
        line.len()
    );
    Ok(())
}

/// A record of `type` with some of the format's fields (any values) and some others.
fn any_record() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            prop::sample::select(TYPES.to_vec()).prop_map(str::to_owned),
            "[a-zA-Z]{0,12}"
        ],
        prop::collection::btree_map(
            prop::sample::select(KNOWN_FIELDS.to_vec()),
            any_json(),
            0..10,
        ),
        prop::collection::btree_map("[a-zA-Z]{1,12}", any_json(), 0..3),
    )
        .prop_map(|(kind, known, other)| {
            let mut record = serde_json::Map::new();
            record.insert("type".into(), kind.into());
            record.extend(other);
            record.extend(known.into_iter().map(|(k, v)| (k.to_owned(), v)));
            Value::Object(record)
        })
}

fn tenant_id() -> impl Strategy<Value = String> {
    any::<u128>().prop_map(|n| uuid::Uuid::from_u128(n).to_string())
}

/// A finding record that follows every rule, with its title and description as given.
fn valid_finding() -> impl Strategy<Value = Value> {
    (
        "[A-Za-z0-9._~:@-]{1,128}",
        tenant_id(),
        "[a-z][a-z0-9_]{0,63}",
        prop::sample::select(vec!["critical", "high", "medium", "low"]),
        prop::sample::select(vec!["open", "resolved", "suppressed"]),
        "[^\\x00]{0,40}[^\\x00\\s][^\\x00]{0,40}",
        prop::option::of("[^\\x00]{0,100}[^\\x00\\s][^\\x00]{0,100}"),
    )
        .prop_map(|(id, tenant, kind, severity, status, title, description)| {
            json!({"type": "finding", "id": id, "cloudTenantId": tenant, "findingType": kind,
                   "severity": severity, "status": status, "title": title,
                   "description": description})
        })
}

/// A JSON value of a type the field cannot take (every finding field is a string or null).
fn wrong_type() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::Bool),
        Just(json!([])),
        Just(json!({"nested": "x"})),
    ]
}

proptest! {
    #[test]
    fn any_text_parses_or_is_rejected_with_a_reason(line in prop_oneof![
        any::<String>(),
        "\\{\"type\":\"[a-zA-Z]{0,20}\"[ -~]{0,80}",
    ]) {
        if let Err(reason) = parse(&line) {
            check_reason(&line, &reason)?;
        }
    }

    #[test]
    fn any_json_record_parses_or_is_rejected_with_a_reason(record in any_record()) {
        let line = record.to_string();
        prop_assume!(line.len() <= MAX_LINE_BYTES);
        match parse(&line) {
            Ok(parsed) => {
                prop_assert!(parsed.is_some(), "a JSON object is not a blank line");
                let kind = record["type"].as_str().unwrap_or_default();
                prop_assert!(TYPES.contains(&kind), "type {kind:?} was accepted");
            }
            Err(reason) => check_reason(&line, &reason)?,
        }
    }

    #[test]
    fn a_valid_finding_parses_to_its_values_whatever_unknown_fields_it_carries(
        record in valid_finding(),
        extra in prop::collection::btree_map("future[A-Za-z0-9]{0,12}", any_json(), 0..4),
    ) {
        let plain = parse(&record.to_string())
            .map_err(|reason| TestCaseError::fail(format!("{record}: {reason}")))?
            .expect("not blank");
        let IngestItem::Finding(finding) = &plain.item else {
            return Err(TestCaseError::fail("not a finding"));
        };
        prop_assert_eq!(finding.id.as_str(), record["id"].as_str().unwrap());
        prop_assert_eq!(finding.cloud_tenant_id.to_string(), record["cloudTenantId"].as_str().unwrap());
        prop_assert_eq!(finding.finding_type.as_str(), record["findingType"].as_str().unwrap());
        prop_assert_eq!(finding.severity.as_str(), record["severity"].as_str().unwrap());
        prop_assert_eq!(finding.status.as_str(), record["status"].as_str().unwrap());
        prop_assert_eq!(finding.title.as_str(), record["title"].as_str().unwrap());
        prop_assert_eq!(finding.description.as_deref(), record["description"].as_str());
        prop_assert!(plain.unknown_fields.is_empty());

        let mut wider = record.clone();
        for (name, value) in &extra {
            wider[name] = value.clone();
        }
        let parsed = parse(&wider.to_string())
            .map_err(|reason| TestCaseError::fail(format!("{wider}: {reason}")))?
            .expect("not blank");
        prop_assert_eq!(&parsed.item, &plain.item);
        prop_assert_eq!(parsed.unknown_fields, extra.keys().cloned().collect::<Vec<_>>());
    }

    #[test]
    fn a_known_field_with_a_value_of_the_wrong_type_rejects_the_line(
        record in valid_finding(),
        field in prop::sample::select(vec![
            "id", "cloudTenantId", "findingType", "severity", "status", "title",
            "description", "identityId", "detectedAt",
        ]),
        value in wrong_type(),
        extra in prop::collection::btree_map("future[A-Za-z0-9]{0,12}", any_json(), 0..3),
    ) {
        let mut record = record;
        record[field] = value;
        for (name, value) in extra {
            record[name] = value;
        }
        let line = record.to_string();
        let reason = parse(&line).expect_err("a wrongly typed known field was accepted");
        check_reason(&line, &reason)?;
    }

    #[test]
    fn a_title_is_accepted_exactly_when_the_documented_rule_holds(
        record in valid_finding(),
        title in hostile_string(),
    ) {
        let mut record = record;
        record["title"] = title.clone().into();
        let documented = !title.trim().is_empty()
            && title.chars().count() <= MAX_TITLE_LEN
            && !title.contains('\0');
        match parse(&record.to_string()) {
            Ok(_) => prop_assert!(documented, "{title:?} was accepted"),
            Err(reason) => {
                prop_assert!(!documented, "{title:?} was refused: {reason}");
                prop_assert!(reason.starts_with("title: "), "{reason}");
            }
        }
    }

    #[test]
    fn a_finding_type_is_accepted_exactly_when_it_is_lower_snake_case_up_to_64(
        record in valid_finding(),
        kind in prop_oneof!["[a-z][a-z0-9_]{0,70}", "[ -~]{0,70}", any::<String>()],
    ) {
        let mut record = record;
        record["findingType"] = kind.clone().into();
        let documented = kind.len() <= 64
            && kind.starts_with(|c: char| c.is_ascii_lowercase())
            && kind.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        match parse(&record.to_string()) {
            Ok(_) => prop_assert!(documented, "{kind:?} was accepted"),
            Err(reason) => {
                prop_assert!(!documented, "{kind:?} was refused: {reason}");
                prop_assert!(reason.contains("findingType"), "{reason}");
            }
        }
    }
}
