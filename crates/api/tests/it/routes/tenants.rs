//! `GET /api/v1/tenants`.

use posture_domain::Scope;
use reqwest::StatusCode;

use crate::support::{TestApp, assert_error};

#[tokio::test]
async fn tenants_lists_only_the_callers_tenants() {
    let app = TestApp::start().await;
    let (a, ta) = app.customer("Contoso").await;
    let (_b, _tb) = app.customer("Fabrikam").await;
    let (_, key) = app.key(a, &[Scope::ReadIdentities]).await;
    let body = app.get_json("/api/v1/tenants", &key, StatusCode::OK).await;
    assert_eq!(body["meta"]["total"], 1);
    let row = &body["data"][0];
    assert_eq!(row["cloudTenantId"], ta.as_str());
    assert_eq!(row["displayName"], "Contoso");
    assert_eq!(row["primaryDomain"], "contoso.onmicrosoft.com");
    assert!(row["connectedAt"].is_string());
}

#[tokio::test]
async fn tenants_with_a_foreign_tenant_filter_is_404() {
    let app = TestApp::start().await;
    let (a, ta) = app.customer("Contoso").await;
    let (_b, tb) = app.customer("Fabrikam").await;
    let (_, key) = app.key(a, &[Scope::ReadIdentities]).await;
    assert_error(
        app.get(&format!("/api/v1/tenants?tenant={tb}"), &key).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let own = app
        .get_json(
            &format!("/api/v1/tenants?tenant={ta}"),
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(own["meta"]["tenant"], ta.as_str());
    assert_eq!(own["meta"]["total"], 1);
}
