//! `GET /api/v1/findings/export?format=ocsf`: OCSF 1.5.0 Detection Finding events, each line
//! valid against the class's JSON Schema (`ocsf/`, generated from py-ocsf-models), mapped as
//! docs/export.md says.

use std::sync::LazyLock;

use posture_domain::Scope;
use posture_test_support::fixtures::{finding, identity};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::TestApp;

static SCHEMA: LazyLock<jsonschema::Validator> = LazyLock::new(|| {
    let schema: Value =
        serde_json::from_str(include_str!("ocsf/detection_finding-1.5.0.schema.json")).unwrap();
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap()
});

async fn ocsf_lines(
    app: &TestApp,
    key: &str,
    query: &str,
) -> (reqwest::header::HeaderMap, Vec<Value>) {
    let response = app
        .get(&format!("/api/v1/findings/export?format=ocsf{query}"), key)
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    assert!(text.is_empty() || text.ends_with('\n'));
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (headers, lines)
}

/// The event of the finding `id` among `lines`.
fn event_of(lines: &[Value], id: &str) -> Value {
    lines
        .iter()
        .find(|l| l["finding_info"]["uid"] == id)
        .unwrap()
        .clone()
}

#[tokio::test]
async fn every_ocsf_line_is_a_valid_detection_finding_event() {
    let app = TestApp::start().await;
    let (scope, tenant) = app.customer("A").await;
    let mut records = vec![identity("u1", &tenant, "Ada Lovelace")];
    let severities = ["critical", "high", "medium", "low"];
    let statuses = ["open", "resolved", "suppressed"];
    for i in 0..24 {
        let mut record = finding(
            &format!("f-{i:02}"),
            &tenant,
            severities[i % 4],
            statuses[i % 3],
            "u1",
        );
        if i % 2 == 0 {
            record["description"] = json!("line one\nline \"two\" \u{2028} <b>");
        }
        if i % 5 == 0 {
            record.as_object_mut().unwrap().remove("identityId");
        }
        records.push(record);
    }
    app.ingest(scope, &records).await;
    let (_, key) = app.key(scope, &[Scope::ReadFindings]).await;
    let (headers, lines) = ocsf_lines(&app, &key, "").await;
    assert_eq!(headers["content-type"], "application/x-ndjson");
    let disposition = headers["content-disposition"].to_str().unwrap();
    assert!(disposition.contains(".ocsf.ndjson"), "{disposition}");
    assert_eq!(headers["x-total-count"], "24");
    assert_eq!(lines.len(), 24);
    // The schema is no formality: it refuses what OCSF does not allow.
    let mut broken = lines[0].clone();
    broken["severity_id"] = json!(7);
    assert!(
        !SCHEMA.is_valid(&broken),
        "severity_id 7 is not an OCSF severity"
    );
    let mut broken = lines[0].clone();
    broken.as_object_mut().unwrap().remove("finding_info");
    assert!(!SCHEMA.is_valid(&broken), "finding_info is required");
    for line in &lines {
        let errors: Vec<String> = SCHEMA
            .iter_errors(line)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{errors:?}\n{line}");
    }
}

#[tokio::test]
async fn ocsf_events_map_severity_status_activity_and_resources() {
    let app = TestApp::start().await;
    let (scope, tenant) = app.customer("A").await;
    let mut open = finding("f-open", &tenant, "critical", "open", "u1");
    open["description"] = json!("standing access");
    app.ingest(
        scope,
        &[
            identity("u1", &tenant, "Ada Lovelace"),
            open,
            finding("f-resolved", &tenant, "low", "resolved", "u1"),
            finding("f-suppressed", &tenant, "medium", "suppressed", "u1"),
        ],
    )
    .await;
    let (_, key) = app.key(scope, &[Scope::ReadFindings]).await;
    let (_, lines) = ocsf_lines(&app, &key, "").await;
    let by_id = |id: &str| event_of(&lines, id);

    let open = by_id("f-open");
    assert_eq!(open["class_uid"], 2004);
    assert_eq!(open["category_uid"], 2);
    assert_eq!(open["activity_id"], 1);
    assert_eq!(open["type_uid"], 200401);
    assert_eq!(open["severity_id"], 5);
    assert_eq!(open["severity"], "Critical");
    assert_eq!(open["status_id"], 1);
    assert_eq!(open["status"], "New");
    assert_eq!(open["finding_info"]["title"], "Finding f-open");
    assert_eq!(open["finding_info"]["desc"], "standing access");
    assert_eq!(
        open["finding_info"]["types"],
        json!(["standing_privileged_access"])
    );
    assert_eq!(open["metadata"]["version"], "1.5.0");
    assert_eq!(open["metadata"]["product"]["name"], "posture");
    assert_eq!(
        open["resources"],
        json!([
            {"uid": "u1", "name": "Ada Lovelace", "type": "user"},
            {"uid": tenant, "type": "cloudTenant"}
        ])
    );
    let info = &open["finding_info"];
    assert_eq!(
        open["time"].as_i64(),
        info["last_seen_time"]
            .as_i64()
            .max(info["modified_time"].as_i64())
    );
    assert!(
        open["time"].as_i64().unwrap() > 1_700_000_000_000,
        "epoch milliseconds"
    );

    let resolved = by_id("f-resolved");
    assert_eq!(
        (
            resolved["activity_id"].clone(),
            resolved["type_uid"].clone()
        ),
        (json!(3), json!(200403))
    );
    assert_eq!(
        (
            resolved["status_id"].clone(),
            resolved["severity_id"].clone()
        ),
        (json!(4), json!(2))
    );
    assert_eq!(by_id("f-suppressed")["status_id"], 3);
    assert_eq!(by_id("f-suppressed")["severity_id"], 3);

    // A later pass reporting it again makes the event an update.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    app.ingest(
        scope,
        &[
            identity("u1", &tenant, "Ada Lovelace"),
            finding("f-open", &tenant, "critical", "open", "u1"),
        ],
    )
    .await;
    let (_, lines) = ocsf_lines(&app, &key, "&severity=critical").await;
    assert_eq!(lines.len(), 1, "filters apply as to the NDJSON export");
    assert_eq!(lines[0]["activity_id"], 2);
    assert_eq!(lines[0]["type_uid"], 200402);
}

#[tokio::test]
async fn a_triage_is_the_events_review_status_with_its_reason_and_comment() {
    let app = TestApp::start().await;
    let (scope, tenant) = app.customer("A").await;
    let mut records = vec![identity("u1", &tenant, "Ada Lovelace")];
    for (id, status) in [
        ("f-ack", "open"),
        ("f-dismissed", "open"),
        ("f-accepted", "open"),
        ("f-resolved", "resolved"),
        ("f-new", "open"),
    ] {
        records.push(finding(id, &tenant, "high", status, "u1"));
    }
    app.ingest(scope, &records).await;
    let (_, key) = app
        .key(scope, &[Scope::ReadFindings, Scope::WriteFindings])
        .await;
    let until = (chrono::Utc::now() + chrono::Duration::days(30)).to_rfc3339();
    for (ids, triage) in [
        (json!([{"id": "f-ack"}]), json!({"state": "acknowledged"})),
        (
            json!([{"id": "f-dismissed"}, {"id": "f-resolved"}]),
            json!({"state": "dismissed", "reason": "false_positive",
                   "comment": "Break-glass account\nreviewed quarterly"}),
        ),
        (
            json!([{"id": "f-accepted"}]),
            json!({"state": "risk_accepted", "reason": "compensating_control",
                   "expiresAt": until}),
        ),
    ] {
        let response = app
            .client
            .post(app.url("/api/v1/findings/triage"))
            .bearer_auth(&key)
            .json(&json!({"findings": ids, "triage": triage}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    let (_, lines) = ocsf_lines(&app, &key, "").await;
    let by_id = |id: &str| event_of(&lines, id);
    for line in &lines {
        let errors: Vec<String> = SCHEMA.iter_errors(line).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}\n{line}");
    }
    let review = |id: &str| {
        let line = by_id(id);
        (
            line["status_id"].as_u64().unwrap(),
            line["status"].as_str().unwrap().to_owned(),
            line["status_detail"].as_str().map(str::to_owned),
        )
    };
    assert_eq!(
        review("f-ack"),
        (2, "In Progress".into(), Some("acknowledged".into()))
    );
    assert_eq!(
        review("f-dismissed"),
        (
            3,
            "Suppressed".into(),
            Some("dismissed: false_positive".into())
        )
    );
    assert_eq!(
        review("f-accepted"),
        (
            3,
            "Suppressed".into(),
            Some("risk_accepted: compensating_control".into())
        )
    );
    assert_eq!(review("f-new"), (1, "New".into(), None));
    // A resolved finding stays resolved: the analyzer says it is gone, whatever the review.
    assert_eq!(review("f-resolved").0, 4);
    let dismissed = by_id("f-dismissed");
    assert_eq!(
        dismissed["comment"],
        "Break-glass account\nreviewed quarterly"
    );
    assert_eq!(dismissed["unmapped"]["triage"]["reason"], "false_positive");
    // The whole mark, as the API shows it.
    let read = app
        .get_json("/api/v1/findings/f-accepted", &key, StatusCode::OK)
        .await;
    assert_eq!(
        by_id("f-accepted")["unmapped"]["triage"],
        read["data"]["triage"]
    );
    let untriaged = by_id("f-new");
    assert!(untriaged.get("comment").is_none() && untriaged.get("unmapped").is_none());
    // A triage alone moves `time` and `modified_time` (a consumer keeping one line per
    // `(uid, time)` keeps the change); `last_seen_time` stays the pass's.
    let millis = |at: &serde_json::Value| {
        chrono::DateTime::parse_from_rfc3339(at.as_str().unwrap())
            .unwrap()
            .timestamp_millis()
    };
    let ack = by_id("f-ack");
    let read = app
        .get_json("/api/v1/findings/f-ack", &key, StatusCode::OK)
        .await;
    assert_eq!(
        ack["finding_info"]["modified_time"],
        millis(&read["data"]["modifiedAt"])
    );
    assert_eq!(
        ack["finding_info"]["last_seen_time"],
        millis(&read["data"]["updatedAt"])
    );
    assert!(millis(&read["data"]["modifiedAt"]) > millis(&read["data"]["updatedAt"]));
    assert_eq!(ack["time"], ack["finding_info"]["modified_time"]);
    let info = &untriaged["finding_info"];
    let latest = info["last_seen_time"]
        .as_i64()
        .max(info["modified_time"].as_i64());
    assert_eq!(untriaged["time"].as_i64(), latest);
}
