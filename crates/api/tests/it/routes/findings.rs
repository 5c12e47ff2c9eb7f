//! `GET /api/v1/findings` and `/findings/{id}`: filters, order, totals, detail.

use std::collections::BTreeSet;

use posture_domain::Scope;
use posture_test_support::fixtures::{finding, identity, tenant, tenant_id};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestApp, assert_error};

const SEVERITIES: [&str; 4] = ["critical", "high", "medium", "low"];
const STATUSES: [&str; 3] = ["open", "resolved", "suppressed"];
const TYPES: [&str; 3] = [
    "tier0_permanent_root",
    "mfa_not_enforced",
    "unused_permissions",
];

/// One ingested finding, as the test knows it.
struct Known {
    id: String,
    severity: &'static str,
    status: &'static str,
    finding_type: &'static str,
    tenant: String,
}

/// Customer A with 72 findings over two tenants covering every combination, and customer B
/// with a few of its own. Returns (A's key, B's key, A's findings, A's tenants).
async fn dataset(app: &TestApp) -> (String, String, Vec<Known>, [String; 2]) {
    let (a, t1) = app.customer("A").await;
    let t2 = tenant_id();
    let mut records = vec![
        tenant(&t2, "A2"),
        identity("u1", &t1, "Ada"),
        identity("u2", &t2, "Grace"),
    ];
    let mut known = Vec::new();
    for i in 0..72 {
        let k = Known {
            id: format!("f-{i:03}"),
            severity: SEVERITIES[i % 4],
            status: STATUSES[i % 3],
            finding_type: TYPES[(i / 12) % 3],
            tenant: if i % 2 == 0 { t1.clone() } else { t2.clone() },
        };
        records.push(
            json!({"type": "finding", "id": k.id, "cloudTenantId": k.tenant,
            "findingType": k.finding_type, "severity": k.severity, "status": k.status,
            "title": format!("Finding {i}"), "identityId": if i % 2 == 0 { "u1" } else { "u2" },
            "detectedAt": format!("2026-10-01T00:{:02}:00Z", i % 60)}),
        );
        known.push(k);
    }
    app.ingest(a, &records).await;
    let (b, tb) = app.customer("B").await;
    app.ingest(
        b,
        &[
            identity("u1", &tb, "B user"),
            posture_test_support::fixtures::finding("f-000", &tb, "critical", "open", "u1"),
        ],
    )
    .await;
    let (_, key_a) = app.key(a, &[Scope::ReadFindings]).await;
    let (_, key_b) = app.key(b, &[Scope::ReadFindings]).await;
    (key_a, key_b, known, [t1, t2])
}

/// Every id of a filtered list, paging through it; checks meta.total on each page.
async fn all_ids(app: &TestApp, key: &str, query: &str) -> (BTreeSet<String>, u64) {
    let mut ids = BTreeSet::new();
    let mut offset = 0;
    let mut total = None;
    loop {
        let body = app
            .get_json(
                &format!("/api/v1/findings?{query}&limit=20&offset={offset}"),
                key,
                StatusCode::OK,
            )
            .await;
        let page_total = body["meta"]["total"].as_u64().unwrap();
        assert_eq!(
            *total.get_or_insert(page_total),
            page_total,
            "meta.total is constant"
        );
        let rows = body["data"].as_array().unwrap();
        if rows.is_empty() {
            break;
        }
        offset += rows.len();
        for row in rows {
            assert!(
                ids.insert(row["id"].as_str().unwrap().to_owned()),
                "each row once"
            );
        }
    }
    (ids, total.unwrap_or(0))
}

fn expected(known: &[Known], keep: impl Fn(&Known) -> bool) -> BTreeSet<String> {
    known
        .iter()
        .filter(|k| keep(k))
        .map(|k| k.id.clone())
        .collect()
}

#[tokio::test]
async fn each_filter_alone_returns_exactly_the_matching_rows() {
    let app = TestApp::start().await;
    let (key, _, known, [_, t2]) = dataset(&app).await;
    let cases: Vec<(String, BTreeSet<String>)> = vec![
        (
            "severity=critical".into(),
            expected(&known, |k| k.severity == "critical"),
        ),
        (
            "severity=critical,high".into(),
            expected(&known, |k| matches!(k.severity, "critical" | "high")),
        ),
        (
            "status=open".into(),
            expected(&known, |k| k.status == "open"),
        ),
        (
            "status=resolved,suppressed".into(),
            expected(&known, |k| k.status != "open"),
        ),
        (
            "findingType=mfa_not_enforced".into(),
            expected(&known, |k| k.finding_type == "mfa_not_enforced"),
        ),
        (format!("tenant={t2}"), expected(&known, |k| k.tenant == t2)),
    ];
    for (query, want) in cases {
        let (got, total) = all_ids(&app, &key, &query).await;
        assert!(!want.is_empty());
        assert_eq!(got, want, "{query}");
        assert_eq!(total, want.len() as u64, "meta.total for {query}");
    }
}

#[tokio::test]
async fn a_repeated_list_filter_is_the_same_as_its_comma_list() {
    // What openapi-python-client sends for a list (docs/clients.md).
    let app = TestApp::start().await;
    let (key, _, known, _) = dataset(&app).await;
    let want = expected(&known, |k| matches!(k.severity, "critical" | "high"));
    let (repeated, total) = all_ids(&app, &key, "severity=critical&severity=high").await;
    let (comma, _) = all_ids(&app, &key, "severity=critical,high").await;
    assert_eq!(repeated, want);
    assert_eq!(repeated, comma);
    assert_eq!(total, want.len() as u64);
    // A parameter that takes one value still may not repeat.
    let reason = assert_error(
        app.get("/api/v1/findings?limit=5&limit=6", &key).await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    )
    .await;
    assert!(
        reason.starts_with("limit is given more than once"),
        "{reason}"
    );
}

#[tokio::test]
async fn combined_filters_apply_together() {
    let app = TestApp::start().await;
    let (key, _, known, [t1, _]) = dataset(&app).await;
    let want = expected(&known, |k| {
        matches!(k.severity, "critical" | "high") && k.status == "open"
    });
    let body = app
        .get_json(
            "/api/v1/findings?severity=critical,high&status=open&limit=5",
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(body["meta"]["total"], want.len());
    assert_eq!(body["meta"]["limit"], 5);
    let rows = body["data"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
    for row in rows {
        assert!(want.contains(row["id"].as_str().unwrap()), "{row}");
    }
    let query = format!(
        "severity=low&status=resolved,open&findingType=tier0_permanent_root,unused_permissions&tenant={t1}"
    );
    let want = expected(&known, |k| {
        k.severity == "low"
            && k.status != "suppressed"
            && k.finding_type != "mfa_not_enforced"
            && k.tenant == t1
    });
    let (got, total) = all_ids(&app, &key, &query).await;
    assert_eq!(got, want);
    assert_eq!(total, want.len() as u64);
}

#[tokio::test]
async fn findings_are_ordered_most_severe_first_then_newest_then_id() {
    let app = TestApp::start().await;
    let (key, _, _, _) = dataset(&app).await;
    let body = app
        .get_json("/api/v1/findings?limit=500", &key, StatusCode::OK)
        .await;
    let rank = |s: &str| SEVERITIES.iter().position(|x| *x == s).unwrap();
    let rows: Vec<(usize, String, String)> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                rank(r["severity"].as_str().unwrap()),
                r["detectedAt"].as_str().unwrap().to_owned(),
                r["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut sorted = rows.clone();
    sorted.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    assert_eq!(rows, sorted);
    assert_eq!(rows.len(), 72);
}

#[tokio::test]
async fn unknown_filter_values_are_400_naming_the_parameter_and_allowed_values() {
    let app = TestApp::start().await;
    let (key, _, _, _) = dataset(&app).await;
    for (query, parameter, allowed) in [
        ("severity=urgent", "severity", "critical, high, medium, low"),
        (
            "severity=critical,",
            "severity",
            "critical, high, medium, low",
        ),
        ("severity=", "severity", "critical"),
        ("status=closed", "status", "open, resolved, suppressed"),
        (
            "findingType=Bad-Thing",
            "findingType",
            "not a finding type (lower snake case",
        ),
    ] {
        let response = app.get(&format!("/api/v1/findings?{query}"), &key).await;
        let reason = assert_error(response, StatusCode::BAD_REQUEST, "invalid_request").await;
        assert!(reason.starts_with(parameter), "{query}: {reason}");
        assert!(reason.contains(allowed), "{query}: {reason}");
    }
}

#[tokio::test]
async fn finding_detail_has_the_identity_summary_and_no_meta() {
    let app = TestApp::start().await;
    let (key, _, known, _) = dataset(&app).await;
    let body = app
        .get_json("/api/v1/findings/f-001", &key, StatusCode::OK)
        .await;
    assert!(body.get("meta").is_none());
    let data = &body["data"];
    assert_eq!(data["id"], "f-001");
    assert_eq!(data["severity"], known[1].severity);
    assert_eq!(data["cloudTenantId"], known[1].tenant.as_str());
    assert_eq!(
        data["identity"],
        json!({"id": "u2", "displayName": "Grace", "kind": "user", "cloudTenantId": known[1].tenant})
    );
}

#[tokio::test]
async fn a_finding_without_an_identity_has_identity_null() {
    let app = TestApp::start().await;
    let (a, t) = app.customer("A").await;
    app.ingest(a, &[json!({"type": "finding", "id": "tenant-wide", "cloudTenantId": t,
        "findingType": "legacy_authentication", "severity": "medium", "title": "Legacy auth allowed"})]).await;
    let (_, key) = app.key(a, &[Scope::ReadFindings]).await;
    let body = app
        .get_json("/api/v1/findings/tenant-wide", &key, StatusCode::OK)
        .await;
    assert_eq!(body["data"]["identity"], Value::Null);
    assert_eq!(body["data"]["status"], "open", "status defaults to open");
}

#[tokio::test]
async fn another_customers_finding_is_404_and_never_listed() {
    let app = TestApp::start().await;
    let (key_a, key_b, _, [t1, _]) = dataset(&app).await;
    // Both customers have a finding "f-000"; each sees its own.
    let a = app
        .get_json("/api/v1/findings/f-000", &key_a, StatusCode::OK)
        .await;
    let b = app
        .get_json("/api/v1/findings/f-000", &key_b, StatusCode::OK)
        .await;
    assert_ne!(a["data"]["cloudTenantId"], b["data"]["cloudTenantId"]);
    assert_error(
        app.get("/api/v1/findings/f-001", &key_b).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let b_list = app
        .get_json("/api/v1/findings", &key_b, StatusCode::OK)
        .await;
    assert_eq!(b_list["meta"]["total"], 1);
    assert_error(
        app.get(&format!("/api/v1/findings?tenant={t1}"), &key_b)
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn meta_total_follows_later_passes() {
    let app = TestApp::start().await;
    let (a, t) = app.customer("A").await;
    let (_, key) = app.key(a, &[Scope::ReadFindings]).await;
    let finding = |id: &str, status: &str| {
        json!({"type": "finding", "id": id, "cloudTenantId": t,
        "findingType": "mfa_not_enforced", "severity": "high", "status": status, "title": id})
    };
    app.ingest(a, &[finding("f1", "open"), finding("f2", "open")])
        .await;
    let open = app
        .get_json("/api/v1/findings?status=open", &key, StatusCode::OK)
        .await;
    assert_eq!(open["meta"]["total"], 2);
    app.ingest(a, &[finding("f2", "resolved"), finding("f3", "open")])
        .await;
    let open = app
        .get_json("/api/v1/findings?status=open", &key, StatusCode::OK)
        .await;
    assert_eq!(open["meta"]["total"], 2);
    let resolved = app
        .get_json("/api/v1/findings?status=resolved", &key, StatusCode::OK)
        .await;
    assert_eq!(resolved["meta"]["total"], 1);
    assert_eq!(resolved["data"][0]["id"], "f2");
}

#[tokio::test]
async fn a_finding_type_newer_than_posture_is_filtered_like_any_other() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer("A").await;
    let mut new_type = finding("n1", &tenant, "high", "open", "u1");
    new_type["findingType"] = json!("oauth_consent_grant");
    app.ingest(
        customer,
        &[
            identity("u1", &tenant, "Ada"),
            new_type,
            finding("k1", &tenant, "high", "open", "u1"),
        ],
    )
    .await;
    let (_, key) = app.key(customer, &[Scope::ReadFindings]).await;
    let body = app
        .get_json(
            "/api/v1/findings?findingType=oauth_consent_grant",
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(body["meta"]["total"], 1);
    assert_eq!(body["data"][0]["findingType"], "oauth_consent_grant");
    let none = app
        .get_json(
            "/api/v1/findings?findingType=never_reported",
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(none["meta"]["total"], 0);
}
