//! `GET /api/v1/identities` and `/identities/{id}`: isolation, tenant filter, pagination.

use posture_domain::Scope;
use posture_test_support::fixtures::{identity, tenant};
use reqwest::StatusCode;
use serde_json::Value;

use crate::support::{TestApp, assert_error};

fn ids(body: &Value) -> Vec<String> {
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Customer A with `a_count` identities and B with three, each in its own tenant.
async fn two_customers(app: &TestApp, a_count: usize) -> (String, String, String, String) {
    let (a, ta) = app.customer("A").await;
    let (b, tb) = app.customer("B").await;
    let a_records: Vec<Value> = (0..a_count)
        .map(|i| identity(&format!("a-{i:04}"), &ta, &format!("A user {i}")))
        .collect();
    app.ingest(a, &a_records).await;
    app.ingest(
        b,
        &[
            identity("b-1", &tb, "B1"),
            identity("b-2", &tb, "B2"),
            identity("b-3", &tb, "B3"),
        ],
    )
    .await;
    let (_, key_a) = app.key(a, &[Scope::ReadIdentities]).await;
    let (_, key_b) = app.key(b, &[Scope::ReadIdentities]).await;
    (key_a, key_b, ta, tb)
}

#[tokio::test]
async fn a_customers_key_never_lists_another_customers_identities() {
    let app = TestApp::start().await;
    let (key_a, key_b, _, _) = two_customers(&app, 5).await;
    let a = app
        .get_json("/api/v1/identities", &key_a, StatusCode::OK)
        .await;
    assert_eq!(a["meta"]["total"], 5);
    assert!(ids(&a).iter().all(|id| id.starts_with("a-")));
    let b = app
        .get_json("/api/v1/identities", &key_b, StatusCode::OK)
        .await;
    assert_eq!(ids(&b), vec!["b-1", "b-2", "b-3"]);
}

#[tokio::test]
async fn another_customers_identity_id_is_404() {
    let app = TestApp::start().await;
    let (key_a, _, _, _) = two_customers(&app, 1).await;
    assert_error(
        app.get("/api/v1/identities/b-1", &key_a).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    assert_error(
        app.get("/api/v1/identities/never-existed", &key_a).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn identity_detail_has_role_assignments_and_no_meta() {
    let app = TestApp::start().await;
    let (key_a, _, ta, _) = two_customers(&app, 1).await;
    let body = app
        .get_json("/api/v1/identities/a-0000", &key_a, StatusCode::OK)
        .await;
    assert!(body.get("meta").is_none());
    let data = &body["data"];
    assert_eq!(data["id"], "a-0000");
    assert_eq!(data["cloudTenantId"], ta.as_str());
    assert_eq!(data["kind"], "user");
    assert_eq!(data["roleAssignments"][0]["roleName"], "Global Reader");
    assert_eq!(data["roleAssignments"][0]["assignmentType"], "active");
}

#[tokio::test]
async fn every_identity_row_carries_its_cloud_tenant_id() {
    let app = TestApp::start().await;
    let (key_a, _, ta, _) = two_customers(&app, 3).await;
    let body = app
        .get_json("/api/v1/identities", &key_a, StatusCode::OK)
        .await;
    assert!(
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["cloudTenantId"] == ta.as_str())
    );
}

#[tokio::test]
async fn a_tenant_of_another_customer_is_404_not_403() {
    let app = TestApp::start().await;
    let (key_a, _, _, tb) = two_customers(&app, 1).await;
    let reason = assert_error(
        app.get(&format!("/api/v1/identities?tenant={tb}"), &key_a)
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    assert_eq!(reason, "tenant not found");
}

#[tokio::test]
async fn an_unknown_tenant_is_404_and_text_that_is_no_guid_is_400() {
    let app = TestApp::start().await;
    let (key_a, _, _, _) = two_customers(&app, 1).await;
    let response = app
        .get(
            "/api/v1/identities?tenant=00000000-0000-4000-8000-000000000000",
            &key_a,
        )
        .await;
    let reason = assert_error(response, StatusCode::NOT_FOUND, "not_found").await;
    assert_eq!(
        reason, "tenant not found",
        "same answer for unknown and foreign tenants"
    );
    for tenant in ["not-a-guid", "00000000-0000-4000-8000", "%27%20OR%201=1"] {
        let response = app
            .get(&format!("/api/v1/identities?tenant={tenant}"), &key_a)
            .await;
        let reason = assert_error(response, StatusCode::BAD_REQUEST, "invalid_request").await;
        assert!(
            reason.starts_with("tenant must be a tenant's cloudTenantId, a GUID"),
            "{tenant}: {reason}"
        );
    }
}

#[tokio::test]
async fn the_tenant_filter_restricts_rows_and_meta_tenant_echoes_the_resolved_id() {
    let app = TestApp::start().await;
    let (a, ta) = app.customer("A").await;
    let t2 = posture_test_support::fixtures::tenant_id();
    app.ingest(
        a,
        &[
            tenant(&t2, "Second"),
            identity("x1", &ta, "X1"),
            identity("y1", &t2, "Y1"),
            identity("y2", &t2, "Y2"),
        ],
    )
    .await;
    let (_, key) = app.key(a, &[Scope::ReadIdentities]).await;
    let body = app
        .get_json(
            &format!("/api/v1/identities?tenant={}", t2.to_uppercase()),
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(
        body["meta"]["tenant"],
        t2.as_str(),
        "resolved to the canonical lowercase id"
    );
    assert_eq!(body["meta"]["total"], 2);
    assert_eq!(ids(&body), vec!["y1", "y2"]);
    let unfiltered = app
        .get_json("/api/v1/identities", &key, StatusCode::OK)
        .await;
    assert!(
        unfiltered["meta"].get("tenant").is_none(),
        "omitted, not null, without a filter"
    );
    assert_eq!(unfiltered["meta"]["total"], 3);
}

#[tokio::test]
async fn limit_defaults_to_100() {
    let app = TestApp::start().await;
    let (key_a, _, _, _) = two_customers(&app, 120).await;
    let body = app
        .get_json("/api/v1/identities", &key_a, StatusCode::OK)
        .await;
    assert_eq!(body["meta"]["limit"], 100);
    assert_eq!(body["meta"]["offset"], 0);
    assert_eq!(body["meta"]["total"], 120);
    assert_eq!(ids(&body).len(), 100);
}

#[tokio::test]
async fn limit_above_500_is_clamped_to_500_not_rejected() {
    let app = TestApp::start().await;
    let (key_a, _, _, _) = two_customers(&app, 520).await;
    let body = app
        .get_json("/api/v1/identities?limit=1000", &key_a, StatusCode::OK)
        .await;
    assert_eq!(body["meta"]["limit"], 500);
    assert_eq!(ids(&body).len(), 500);
    assert_eq!(body["meta"]["total"], 520);
}

#[tokio::test]
async fn a_malformed_limit_or_offset_is_400_naming_the_parameter() {
    let app = TestApp::start().await;
    let (key_a, _, _, _) = two_customers(&app, 1).await;
    for (query, parameter) in [
        ("limit=abc", "limit"),
        ("limit=-1", "limit"),
        ("limit=0", "limit"),
        ("limit=1.5", "limit"),
        ("offset=-1", "offset"),
        ("offset=x", "offset"),
        ("limit=10&limit=20", "limit"),
    ] {
        let response = app
            .get(&format!("/api/v1/identities?{query}"), &key_a)
            .await;
        let reason = assert_error(response, StatusCode::BAD_REQUEST, "invalid_request").await;
        assert!(reason.starts_with(parameter), "{query}: {reason}");
    }
}

#[tokio::test]
async fn paging_with_limit_and_offset_yields_every_row_once_with_a_constant_total() {
    let app = TestApp::start().await;
    let (key_a, _, _, _) = two_customers(&app, 47).await;
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let body = app
            .get_json(
                &format!("/api/v1/identities?limit=10&offset={offset}"),
                &key_a,
                StatusCode::OK,
            )
            .await;
        assert_eq!(body["meta"]["total"], 47);
        assert_eq!(body["meta"]["offset"], offset);
        let page = ids(&body);
        if page.is_empty() {
            break;
        }
        offset += page.len();
        seen.extend(page);
    }
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 47);
    assert_eq!(seen, unique, "stable order (by id), each row once");
}
