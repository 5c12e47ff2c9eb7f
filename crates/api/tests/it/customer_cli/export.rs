//! `posture export`: the API's export, byte for byte, compressed on the wire.

use posture_cli::{
    export::{ExportQuery, export},
    progress::Quiet,
};
use posture_test_support::fixtures::{finding, identity};
use serde_json::json;

use super::cli;
use crate::support::TestApp;

#[tokio::test]
async fn an_export_is_the_apis_byte_for_byte_and_crosses_the_wire_compressed() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let mut records = vec![identity("u1", &t, "Ada")];
    for i in 0..300 {
        let severity = ["critical", "high", "medium", "low"][i % 4];
        records.push(finding(&format!("f{i:03}"), &t, severity, "open", "u1"));
    }
    app.ingest(customer, &records).await;
    let first = app.get("/api/v1/findings/export", &key).await;
    let watermark = first.headers()["x-synced-through"]
        .to_str()
        .unwrap()
        .to_owned();
    records[5]["title"] = json!("renamed");
    app.ingest(customer, &records).await;
    let (api, _) = cli(&app, &key);
    let cases = [
        ("ndjson", None, None),
        ("cef", Some("critical,high"), None),
        ("ocsf", None, None),
        ("ndjson", None, Some(watermark.clone())),
    ];
    for (format, severity, since) in cases {
        let query = ExportQuery {
            format: format.into(),
            severity: severity.map(str::to_owned),
            modified_since: since.clone(),
            ..ExportQuery::default()
        };
        let mut out = Vec::new();
        let report = export(&api, &query, &mut out, &Quiet).await.unwrap();
        // The API's own answer, asked without compression.
        let mut url = format!("/api/v1/findings/export?format={format}");
        if let Some(severity) = severity {
            url.push_str(&format!("&severity={severity}"));
        }
        if let Some(since) = &since {
            url.push_str(&format!("&modifiedSince={}", since.replace(':', "%3A")));
        }
        let response = app.get(&url, &key).await;
        assert!(response.headers().get("content-encoding").is_none());
        let served = response.bytes().await.unwrap();
        assert!(
            out == served,
            "{format} {severity:?} {since:?}: not the API's bytes"
        );
        let lines = served.iter().filter(|&&b| b == b'\n').count() as u64;
        assert_eq!(report.lines, lines);
        assert_eq!(report.bytes, served.len() as u64);
        if since.is_some() {
            assert_eq!(lines, 1, "only the renamed finding changed since");
        } else {
            assert_eq!(report.encoding, "zstd", "{format}");
            assert!(
                report.wire_bytes * 4 < report.bytes,
                "{format}: {} bytes on the wire for {}",
                report.wire_bytes,
                report.bytes
            );
        }
        assert!(report.synced_through.is_some());
    }

    // `--triage-state`: the triage filter, as the API applies it.
    let dismissed = app
        .client
        .patch(app.url("/api/v1/findings/f007"))
        .bearer_auth(&key)
        .json(&json!({"triage": {"state": "dismissed", "reason": "false_positive"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(dismissed.status(), reqwest::StatusCode::OK);
    let query = ExportQuery {
        format: "ndjson".into(),
        triage_state: Some("dismissed".into()),
        ..ExportQuery::default()
    };
    let mut out = Vec::new();
    let report = export(&api, &query, &mut out, &Quiet).await.unwrap();
    assert_eq!(report.lines, 1);
    let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(line["id"], "f007");
    assert_eq!(line["triage"]["state"], "dismissed");

    // A filter the API refuses: its reason, in words.
    let query = ExportQuery {
        format: "ndjson".into(),
        severity: Some("urgent".into()),
        ..ExportQuery::default()
    };
    let err = export(&api, &query, &mut Vec::new(), &Quiet)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("posture refused the request: severity") && text.contains("critical"),
        "{text}"
    );
}
