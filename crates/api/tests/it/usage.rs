//! `posture-api customers usage`: who uses how much of the shared database.

use posture_test_support::fixtures;
use reqwest::StatusCode;
use serde_json::Value;

use crate::cli::{json_of, posture_api};

/// `customers usage` says what each customer's data takes, by category, the largest first;
/// `--customer` only that one's.
#[tokio::test]
async fn customers_usage_shows_who_uses_how_much() {
    use posture_domain::Scope;
    let app = crate::support::TestApp::start().await;
    let (busy, tenant) = app.customer_with_one_of_each("Busy").await;
    let (quiet, _) = app.customer_with_one_of_each("Quiet").await;
    let (_, key) = app
        .key(busy, &[Scope::ReadFindings, Scope::WriteFindings])
        .await;
    let findings: Vec<Value> = (0..50)
        .map(|i| fixtures::finding(&format!("b{i:02}"), &tenant, "high", "open", "u1"))
        .collect();
    app.ingest(busy, &findings).await;
    let ids: Vec<Value> = (0..50)
        .map(|i| serde_json::json!({"id": format!("b{i:02}")}))
        .collect();
    let triaged = app
        .client
        .post(app.url("/api/v1/findings/triage"))
        .bearer_auth(&key)
        .json(&serde_json::json!({
            "findings": ids,
            "triage": {"state": "acknowledged", "comment": "𝒜".repeat(2000)},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(triaged.status(), StatusCode::OK);
    let usage = json_of(&posture_api(
        &app.db,
        &["customers", "usage", "--json"],
        None,
    ));
    let rows = usage["data"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let (first, second) = (&rows[0], &rows[1]);
    assert_eq!(first["customerId"], busy.customer_id().to_string());
    assert_eq!(first["name"], "Busy");
    assert!(first["totalBytes"].as_u64() > second["totalBytes"].as_u64());
    let triage = &first["categories"]["triage"];
    assert_eq!(
        triage["rows"], 51,
        "50 history records and the comment, once"
    );
    assert!(
        (2_000..40_000).contains(&triage["bytes"].as_u64().unwrap()),
        "{triage}"
    );
    assert!(first["categories"]["findings"]["bytes"].as_u64() > Some(0));
    assert!(second["categories"].get("triage").is_none(), "{second}");
    let one = json_of(&posture_api(
        &app.db,
        &[
            "customers",
            "usage",
            "--customer",
            &quiet.customer_id().to_string(),
            "--json",
        ],
        None,
    ));
    assert_eq!(one["data"].as_array().unwrap().len(), 1);
    assert_eq!(one["data"][0]["name"], "Quiet");
    let text = posture_api(&app.db, &["customers", "usage"], None);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.lines().next().unwrap().contains("triage"), "{text}");
    assert!(text.contains("Busy") && text.contains("KiB"), "{text}");
}
