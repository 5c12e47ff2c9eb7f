//! An analyzer newer than posture (docs/ingest.md): a finding type posture does not know and
//! fields it does not know are ingested, served, filtered and exported; the fields are counted.

use posture_domain::Scope;
use posture_test_support::{cef, fixtures};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    cli::{json_of, posture_api},
    support::TestApp,
};

const NEW_TYPE: &str = "oauth_consent_grant_v2";

#[tokio::test]
async fn a_pass_with_a_new_finding_type_and_extra_fields_is_ingested_served_filtered_and_exported()
{
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer("A").await;
    let mut newer = fixtures::finding("f-new", &tenant, "high", "open", "u1");
    newer["findingType"] = json!(NEW_TYPE);
    newer["confidence"] = json!(0.93);
    newer["mitreTechnique"] = json!({"id": "T1098", "tactic": "persistence"});
    let mut identity = fixtures::identity("u1", &tenant, "Ada");
    identity["riskLevel"] = json!("elevated");
    let file = fixtures::lines(&[
        identity,
        newer,
        fixtures::finding("f-old", &tenant, "low", "open", "u1"),
    ]);
    let id = customer.customer_id().to_string();

    let pass = json_of(&posture_api(
        &app.db,
        &["ingest", "--customer", &id, "-", "--json"],
        Some(&file),
    ));
    assert_eq!(pass["findings"], 2);
    assert_eq!(pass["newFindings"], 2);
    assert_eq!(pass["unknownFields"], 3, "{pass}");
    assert_eq!(
        pass["unknownFieldNames"],
        json!(["confidence", "mitreTechnique", "riskLevel"])
    );

    let (_, key) = app.key(customer, &[Scope::ReadFindings]).await;
    let detail = app
        .get_json("/api/v1/findings/f-new", &key, StatusCode::OK)
        .await["data"]
        .take();
    assert_eq!(detail["findingType"], NEW_TYPE, "{detail}");
    let fields: Vec<&String> = detail.as_object().unwrap().keys().collect();
    assert!(
        !fields
            .iter()
            .any(|f| *f == "confidence" || *f == "mitreTechnique"),
        "unknown fields never reach the API: {detail}"
    );

    let filtered = app
        .get_json(
            &format!("/api/v1/findings?findingType={NEW_TYPE}"),
            &key,
            StatusCode::OK,
        )
        .await;
    let ids: Vec<&Value> = filtered["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["id"])
        .collect();
    assert_eq!(ids, [&json!("f-new")]);

    let ndjson = app
        .get(
            &format!("/api/v1/findings/export?format=ndjson&findingType={NEW_TYPE}"),
            &key,
        )
        .await;
    assert_eq!(ndjson.status(), StatusCode::OK);
    let lines: Vec<Value> = ndjson
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["findingType"], NEW_TYPE);

    let body = app
        .get(
            &format!("/api/v1/findings/export?format=cef&findingType={NEW_TYPE}"),
            &key,
        )
        .await
        .text()
        .await
        .unwrap();
    let (header, extension) = cef::parse(body.trim_end_matches('\n')).expect("one CEF line");
    assert_eq!(header[4], NEW_TYPE, "the type is the CEF signature id");
    assert_eq!(extension["cat"], NEW_TYPE);
}

#[tokio::test]
async fn the_ingest_command_warns_about_unknown_fields_on_stderr() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer("A").await;
    let mut identity = fixtures::identity("u1", &tenant, "Ada");
    identity["riskLevel"] = json!("elevated");
    let output = posture_api(
        &app.db,
        &[
            "ingest",
            "--customer",
            &customer.customer_id().to_string(),
            "-",
        ],
        Some(&fixtures::lines(&[identity])),
    );
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("warning: 1 fields posture does not know were ignored (riskLevel)"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_pass_summary_counts_every_unknown_field_but_names_at_most_20() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer("A").await;
    let mut identity = fixtures::identity("u1", &tenant, "Ada");
    for i in 0..25 {
        identity[format!("future{i:02}")] = json!(i);
    }
    let pass = json_of(&posture_api(
        &app.db,
        &[
            "ingest",
            "--customer",
            &customer.customer_id().to_string(),
            "-",
            "--json",
        ],
        Some(&fixtures::lines(&[identity.clone(), identity])),
    ));
    assert_eq!(pass["unknownFields"], 50);
    let names = pass["unknownFieldNames"].as_array().unwrap();
    assert_eq!(names.len(), 20);
    assert_eq!(names[0], "future00");
}
