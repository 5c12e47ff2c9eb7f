//! The OAuth clients settings: issue (the secret shown once), a key client, rotation with
//! an overlap, revocation, customer isolation.

use posture_domain::{KeyId, ports::ClientRepository};
use reqwest::StatusCode;
use serde_json::Value;

use super::support::{Admin, admin, customer_with_console, html, location, page, post_form};
use crate::{
    oauth::{EC_PUBLIC, basic, token_request, token_status},
    support::TestApp,
};

fn form_token(admin: &Admin) -> String {
    crate::support::test_keyring()
        .form_key()
        .issue_form_token(&admin.csrf, KeyId::generate())
}

/// The text starting with `prefix` on a page, up to the first character of no id.
fn shown(page: &str, prefix: &str) -> String {
    let start = page.find(prefix).expect("the page shows it");
    page[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

#[tokio::test]
async fn an_admin_issues_rotates_and_revokes_a_client() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let alice = admin(&app, scope, "Alice Admin").await;
    let path = format!("/console/{customer}/clients");
    let token = form_token(&alice);
    let form = [
        ("csrf", alice.csrf.as_str()),
        ("client_id", token.as_str()),
        ("name", "SOAR"),
        ("scope", "read:findings"),
        ("public_key", ""),
    ];
    let response = post_form(&app, &path, &alice, &form).await;
    assert_eq!(response.headers()["cache-control"], "no-store");
    let issued = html(response, StatusCode::OK).await;
    assert!(issued.contains("will not be shown again"));
    let (id, secret) = (shown(&issued, "pci_"), shown(&issued, "pcs_"));
    assert_eq!(token_status(&app, &id, &secret).await, StatusCode::OK);
    // Sent again: nothing issued twice, nothing secret shown.
    let again = html(post_form(&app, &path, &alice, &form).await, StatusCode::OK).await;
    assert!(again.contains("This form was already sent"), "{again}");
    assert!(!again.contains(&secret));
    let clients = app.store.list_clients(scope).await.unwrap();
    assert_eq!(clients.len(), 1);
    assert_eq!(clients[0].created_by, "Alice Admin");
    let listed = html(page(&app, &path, Some(&alice)).await, StatusCode::OK).await;
    assert!(listed.contains(&id) && !listed.contains(&secret));

    // Rotation with an hour's overlap: both secrets work; the new one is shown once.
    let rotate = format!("{path}/{}/rotate", clients[0].id);
    let token = form_token(&alice);
    let rotation = [
        ("csrf", alice.csrf.as_str()),
        ("credential_id", token.as_str()),
        ("public_key", ""),
        ("overlap", "1h"),
    ];
    let rotated = html(
        post_form(&app, &rotate, &alice, &rotation).await,
        StatusCode::OK,
    )
    .await;
    let new_secret = shown(&rotated, "pcs_");
    assert_ne!(new_secret, secret);
    assert_eq!(token_status(&app, &id, &secret).await, StatusCode::OK);
    assert_eq!(token_status(&app, &id, &new_secret).await, StatusCode::OK);
    let sent_twice = html(
        post_form(&app, &rotate, &alice, &rotation).await,
        StatusCode::OK,
    )
    .await;
    assert!(sent_twice.contains("Nothing was changed"), "{sent_twice}");
    // A public key that is not one: refused in words, nothing changed.
    let token = form_token(&alice);
    let bad = [
        ("csrf", alice.csrf.as_str()),
        ("credential_id", token.as_str()),
        (
            "public_key",
            "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
        ),
        ("overlap", "now"),
    ];
    let refused = html(
        post_form(&app, &rotate, &alice, &bad).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert!(refused.contains("cannot be used"), "{refused}");
    assert_eq!(
        app.store
            .find_client(Some(scope), clients[0].id)
            .await
            .unwrap()
            .credentials
            .len(),
        2
    );

    // Revocation ends the client's tokens and its secrets.
    let bearer = {
        let response = token_request(
            &app,
            "grant_type=client_credentials",
            Some(&basic(&id, &new_secret)),
        )
        .await;
        let body: Value = response.json().await.unwrap();
        body["access_token"].as_str().unwrap().to_owned()
    };
    let revoke = format!("{path}/{}/revoke", clients[0].id);
    let confirm = html(page(&app, &revoke, Some(&alice)).await, StatusCode::OK).await;
    assert!(confirm.contains("cannot be undone"));
    let done = post_form(&app, &revoke, &alice, &[("csrf", alice.csrf.as_str())]).await;
    assert_eq!(done.status(), StatusCode::SEE_OTHER);
    assert!(location(&done).contains("revoked="));
    assert_eq!(app.get("/api/v1/findings", &bearer).await.status(), 401);
    assert_eq!(
        token_status(&app, &id, &new_secret).await,
        StatusCode::UNAUTHORIZED
    );
    let audit = html(
        page(&app, &format!("/console/{customer}/audit"), Some(&alice)).await,
        StatusCode::OK,
    )
    .await;
    for said in [
        "OAuth client issued",
        "OAuth client rotated",
        "OAuth client revoked",
    ] {
        assert!(audit.contains(said), "{said}");
    }
}

#[tokio::test]
async fn a_key_client_gets_no_secret_and_another_customers_client_is_not_found() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let (other_scope, other) = customer_with_console(&app, "Fabrikam").await;
    let alice = admin(&app, scope, "Alice Admin").await;
    let path = format!("/console/{customer}/clients");
    let token = form_token(&alice);
    let form = [
        ("csrf", alice.csrf.as_str()),
        ("client_id", token.as_str()),
        ("name", "signed"),
        ("scope", "read:identities"),
        ("public_key", EC_PUBLIC),
    ];
    let issued = html(post_form(&app, &path, &alice, &form).await, StatusCode::OK).await;
    assert!(!issued.contains("pcs_"), "a key client has no secret");
    assert!(issued.contains("private_key_jwt"));
    // Fabrikam's admin cannot see or revoke it.
    let bob = admin(&app, other_scope, "Bob Admin").await;
    let client = app.store.list_clients(scope).await.unwrap().remove(0);
    let theirs = format!("/console/{other}/clients/{}/revoke", client.id);
    let refused = post_form(&app, &theirs, &bob, &[("csrf", bob.csrf.as_str())]).await;
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    assert!(
        app.store
            .find_client(Some(scope), client.id)
            .await
            .unwrap()
            .revoked_at
            .is_none()
    );
}
