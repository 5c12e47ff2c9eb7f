//! The console's Directory (read-only): the users and groups provisioned over SCIM, the
//! admin group marked, another customer's group not found.

use posture_domain::Scope;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{
    provisioning::Provisioned,
    support::{browser, html},
};

#[tokio::test]
async fn the_console_shows_provisioned_users_and_groups_read_only() {
    let p = Provisioned::start().await;
    let cookie = p.ana_signs_in().await;
    p.scim
        .call(
            Method::POST,
            "/Groups",
            Some(json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], "displayName": "Staff"})),
            StatusCode::CREATED,
        )
        .await;
    let get = |path: String| {
        let cookie = cookie.clone();
        let url = p.scim.app.url(&format!("/console/{}{path}", p.customer));
        async move {
            browser()
                .get(url)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap()
        }
    };
    let users = html(get("/users".into()).await, StatusCode::OK).await;
    assert!(users.contains("3 users"), "{users}");
    assert!(users.contains(r#"data-user-name="Ana@Contoso.example""#));
    assert!(users.contains("Deactivated"), "carl is deactivated");
    assert!(users.contains("Provisioning is required"));
    let groups = html(get("/groups".into()).await, StatusCode::OK).await;
    let row = |name: &str| {
        let start = groups
            .find(&format!(r#"data-group-name="{name}""#))
            .unwrap();
        groups[start..start + groups[start..].find("</tr>").unwrap()].to_owned()
    };
    assert!(row("Posture Admins").contains(r#"class="badge active">Admins"#));
    assert!(
        !row("Staff").contains("badge"),
        "only the admin group is marked"
    );
    let group = html(get(format!("/groups/{}", p.admins)).await, StatusCode::OK).await;
    assert!(group.contains("2 members."), "{group}");
    assert!(group.contains("Ana@Contoso.example") && group.contains("carl@contoso.example"));

    // Another customer's group is not found; a malformed id either.
    let (other, _) = p.scim.app.customer("Fabrikam").await;
    let (_, other_key) = p.scim.app.key(other, &[Scope::ProvisionScim]).await;
    let theirs = p
        .scim
        .send_as(
            &other_key,
            Method::POST,
            "/Groups",
            Some(json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], "displayName": "Theirs"})),
        )
        .await;
    let theirs: Value = theirs.json().await.unwrap();
    let id = theirs["id"].as_str().unwrap();
    for path in [format!("/groups/{id}"), "/groups/not-an-id".to_owned()] {
        html(get(path).await, StatusCode::NOT_FOUND).await;
    }
    let paged = html(get("/users?start=3".into()).await, StatusCode::OK).await;
    assert!(paged.contains("carl@contoso.example") && !paged.contains("bob@contoso.example"));
}
