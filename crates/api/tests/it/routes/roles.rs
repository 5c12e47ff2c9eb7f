//! `GET /api/v1/roles`.

use posture_domain::Scope;
use posture_test_support::fixtures::{identity, recommendation, tenant, tenant_id};
use reqwest::StatusCode;
use serde_json::json;

use crate::support::{TestApp, assert_error};

#[tokio::test]
async fn recommendations_come_with_their_target_identity_and_what_they_remove() {
    let app = TestApp::start().await;
    let (a, t) = app.customer("A").await;
    let mut svc = identity("sp-1", &t, "payroll-sync");
    svc["kind"] = json!("servicePrincipal");
    app.ingest(a, &[svc, recommendation("r1", &t, "sp-1")])
        .await;
    let (_, key) = app.key(a, &[Scope::ReadRoles]).await;
    let body = app.get_json("/api/v1/roles", &key, StatusCode::OK).await;
    assert_eq!(body["meta"]["total"], 1);
    let rec = &body["data"][0];
    assert_eq!(rec["id"], "r1");
    assert_eq!(rec["cloudTenantId"], t.as_str());
    assert_eq!(
        rec["identity"],
        json!({"id": "sp-1", "displayName": "payroll-sync", "kind": "servicePrincipal", "cloudTenantId": t})
    );
    assert_eq!(rec["currentRoles"], json!(["Owner", "Reader"]));
    assert_eq!(
        rec["recommendedRole"],
        json!({"name": "Reader", "actions": ["*/read"]})
    );
    assert_eq!(
        rec["removes"],
        json!({"roles": ["Owner"], "actions": ["*"]})
    );
}

#[tokio::test]
async fn recommendations_are_scoped_to_the_customer_and_filterable_by_tenant() {
    let app = TestApp::start().await;
    let (a, t1) = app.customer("A").await;
    let t2 = tenant_id();
    app.ingest(
        a,
        &[
            tenant(&t2, "A2"),
            identity("u1", &t1, "One"),
            identity("u2", &t2, "Two"),
            recommendation("r1", &t1, "u1"),
            recommendation("r2", &t2, "u2"),
        ],
    )
    .await;
    let (b, tb) = app.customer("B").await;
    app.ingest(
        b,
        &[identity("u9", &tb, "Nine"), recommendation("r9", &tb, "u9")],
    )
    .await;
    let (_, key) = app.key(a, &[Scope::ReadRoles]).await;
    let all = app.get_json("/api/v1/roles", &key, StatusCode::OK).await;
    let ids: Vec<&str> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["r1", "r2"]);
    let one = app
        .get_json(&format!("/api/v1/roles?tenant={t2}"), &key, StatusCode::OK)
        .await;
    assert_eq!(one["meta"]["total"], 1);
    assert_eq!(one["meta"]["tenant"], t2.as_str());
    assert_eq!(one["data"][0]["id"], "r2");
    assert_error(
        app.get(&format!("/api/v1/roles?tenant={tb}"), &key).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}
