//! Tokens from secrets: the grant, its answers, and the token wherever a key works.

use std::time::Duration;

use posture_domain::{Scope, console::Actor, ports::ClientRepository};
use posture_test_support::waits::wait_for;
use reqwest::StatusCode;
use serde_json::Value;

use super::{basic, client, oauth_error, token, token_request};
use crate::support::TestApp;

#[tokio::test]
async fn a_secret_clients_token_reads_as_a_key_does_and_names_its_client() {
    let app = TestApp::start().await;
    let (scope, _) = app.customer_with_one_of_each("Contoso").await;
    let client = client(
        &app,
        scope,
        &[Scope::ReadFindings, Scope::ReadIdentities],
        None,
    )
    .await;
    let response = token_request(
        &app,
        "grant_type=client_credentials",
        Some(&basic(&client.client_id, client.secret.as_deref().unwrap())),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["cache-control"], "no-store");
    assert_eq!(response.headers()["pragma"], "no-cache");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 900);
    assert_eq!(body["scope"], "read:identities read:findings");
    let token = body["access_token"].as_str().unwrap();
    assert!(token.starts_with("pat_"), "{token}");
    let findings = app
        .get_json("/api/v1/findings", token, StatusCode::OK)
        .await;
    assert_eq!(findings["data"][0]["id"], "f1");
    let me = app
        .get_json("/api/v1/keys/current", token, StatusCode::OK)
        .await;
    assert_eq!(me["data"]["id"], client.id.to_string());
    assert_eq!(me["data"]["prefix"], &client.client_id[..10]);
    // Another customer's data stays out of reach.
    let (other, _) = app.customer_with_one_of_each("Fabrikam").await;
    let _ = other;
    let findings = app
        .get_json("/api/v1/findings", token, StatusCode::OK)
        .await;
    assert_eq!(findings["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn client_secret_post_works_and_scope_narrows_the_token() {
    let app = TestApp::start().await;
    let (scope, _) = app.customer_with_one_of_each("Contoso").await;
    let client = client(
        &app,
        scope,
        &[Scope::ReadFindings, Scope::ReadIdentities],
        None,
    )
    .await;
    let form = format!(
        "grant_type=client_credentials&client_id={}&client_secret={}&scope=read%3Afindings",
        client.client_id,
        client.secret.as_deref().unwrap()
    );
    let response = token_request(&app, &form, None).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["scope"], "read:findings");
    let token = body["access_token"].as_str().unwrap();
    app.get_json("/api/v1/findings", token, StatusCode::OK)
        .await;
    let refused = app.get("/api/v1/identities", token).await;
    assert_eq!(refused.status(), 403);
    // A scope the client does not hold.
    let form = format!(
        "grant_type=client_credentials&client_id={}&client_secret={}&scope=manage:webhooks",
        client.client_id,
        client.secret.as_deref().unwrap()
    );
    let (status, error) = oauth_error(token_request(&app, &form, None).await).await;
    assert_eq!((status, error.as_str()), (400, "invalid_scope"));
}

#[tokio::test]
async fn a_provisioning_token_works_at_scim() {
    let app = TestApp::start().await;
    let (scope, _) = app.customer("Contoso").await;
    let client = client(&app, scope, &[Scope::ProvisionScim], None).await;
    let token = token(&app, &client, "").await;
    let users = app.get_json("/scim/v2/Users", &token, StatusCode::OK).await;
    assert_eq!(users["totalResults"], 0);
    // And nothing under /api/v1.
    assert_eq!(app.get("/api/v1/findings", &token).await.status(), 403);
}

#[tokio::test]
async fn revoking_the_client_ends_its_tokens_within_two_seconds() {
    let app = TestApp::start().await;
    let (scope, _) = app.customer_with_one_of_each("Contoso").await;
    let client = client(&app, scope, &[Scope::ReadFindings], None).await;
    let token = token(&app, &client, "").await;
    app.get_json("/api/v1/findings", &token, StatusCode::OK)
        .await;
    // Revoked as another instance would (its own store: this server hears it by NOTIFY).
    let other = posture_store_postgres::PgStore::new(&app.db.config()).unwrap();
    other
        .revoke_client(None, client.id, &Actor::Operator)
        .await
        .unwrap();
    wait_for(
        "the revoked client's token to be refused",
        Duration::from_secs(2),
        || async { (app.get("/api/v1/findings", &token).await.status() == 401).then_some(()) },
    )
    .await;
    // No new token either.
    let response = token_request(
        &app,
        "grant_type=client_credentials",
        Some(&basic(&client.client_id, client.secret.as_deref().unwrap())),
    )
    .await;
    let (status, error) = oauth_error(response).await;
    assert_eq!((status, error.as_str()), (401, "invalid_client"));
}

#[tokio::test]
async fn a_token_ends_at_its_expiry_on_the_servers_clock() {
    let app = TestApp::with_clock().await;
    let (scope, _) = app.customer_with_one_of_each("Contoso").await;
    let client = client(&app, scope, &[Scope::ReadFindings], None).await;
    let token = token(&app, &client, "").await;
    app.get_json("/api/v1/findings", &token, StatusCode::OK)
        .await;
    app.clock().advance(Duration::from_secs(14 * 60));
    app.get_json("/api/v1/findings", &token, StatusCode::OK)
        .await;
    app.clock().advance(Duration::from_secs(61));
    assert_eq!(app.get("/api/v1/findings", &token).await.status(), 401);
}

#[tokio::test]
async fn a_rotation_keeps_the_old_secret_until_the_time_it_chose() {
    let app = TestApp::with_clock().await;
    let (scope, _) = app.customer("Contoso").await;
    let old = client(&app, scope, &[Scope::ReadFindings], None).await;
    let (credential, new_secret) = posture_domain::oauth::NewCredential::secret().unwrap();
    let until = app.now() + chrono::Duration::minutes(10);
    let rotated = app
        .store
        .add_client_credential(Some(scope), old.id, credential, until, &Actor::Operator)
        .await
        .unwrap();
    assert_eq!(rotated.credentials.len(), 2);
    assert_eq!(rotated.credentials[0].expires_at, Some(until));
    let with = |secret: &str| basic(&old.client_id, secret);
    for secret in [old.secret.as_deref().unwrap(), new_secret.expose()] {
        let response =
            token_request(&app, "grant_type=client_credentials", Some(&with(secret))).await;
        assert_eq!(response.status(), 200, "{secret:.10}");
    }
    app.clock().advance(Duration::from_secs(11 * 60));
    let response = token_request(
        &app,
        "grant_type=client_credentials",
        Some(&with(old.secret.as_deref().unwrap())),
    )
    .await;
    assert_eq!(
        oauth_error(response).await,
        (401, "invalid_client".to_owned())
    );
    let response = token_request(
        &app,
        "grant_type=client_credentials",
        Some(&with(new_secret.expose())),
    )
    .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn the_metadata_names_this_origin_and_what_the_endpoint_takes() {
    let app = TestApp::start().await;
    let document = app
        .get_public_json("/.well-known/oauth-authorization-server")
        .await;
    assert_eq!(document["issuer"], app.base);
    assert_eq!(
        document["token_endpoint"],
        format!("{}/oauth/token", app.base)
    );
    assert_eq!(
        document["grant_types_supported"],
        serde_json::json!(["client_credentials"])
    );
    assert_eq!(
        document["token_endpoint_auth_methods_supported"],
        serde_json::json!([
            "client_secret_basic",
            "client_secret_post",
            "private_key_jwt"
        ])
    );
    assert_eq!(
        document["token_endpoint_auth_signing_alg_values_supported"],
        serde_json::json!(["RS256", "ES256"])
    );
    assert_eq!(document["scopes_supported"].as_array().unwrap().len(), 8);
    let public = TestApp::with_public_url("https://posture.example.com").await;
    let document = public
        .get_public_json("/.well-known/oauth-authorization-server")
        .await;
    assert_eq!(document["issuer"], "https://posture.example.com");
}

#[tokio::test]
async fn a_tokens_use_is_recorded_as_its_clients_last_use() {
    let app = TestApp::start().await;
    let (scope, _) = app.customer_with_one_of_each("Contoso").await;
    let client = client(&app, scope, &[Scope::ReadFindings], None).await;
    let token = token(&app, &client, "").await;
    app.get_json("/api/v1/findings", &token, StatusCode::OK)
        .await;
    wait_for("the client's last use", Duration::from_secs(5), || async {
        let listed = app.store.find_client(Some(scope), client.id).await.unwrap();
        listed.last_used_at.map(|_| ())
    })
    .await;
    // Neither the token nor the secret reaches the logs.
    let logs = posture_test_support::logs::captured();
    assert!(!logs.contains(&token[4..]));
    assert!(!logs.contains(&client.secret.as_deref().unwrap()[4..]));
}

#[tokio::test]
async fn a_rotation_past_five_credentials_is_refused_and_changes_nothing() {
    let app = TestApp::start().await;
    let (scope, _) = app.customer("Contoso").await;
    let client = client(&app, scope, &[Scope::ReadFindings], None).await;
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    for _ in 0..4 {
        let (credential, _) = posture_domain::oauth::NewCredential::secret().unwrap();
        app.store
            .add_client_credential(None, client.id, credential, later, &Actor::Operator)
            .await
            .unwrap();
    }
    let before = app.store.find_client(None, client.id).await.unwrap();
    assert_eq!(before.credentials.len(), 5);
    let (credential, _) = posture_domain::oauth::NewCredential::secret().unwrap();
    let refused = app
        .store
        .add_client_credential(None, client.id, credential, later, &Actor::Operator)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, posture_domain::Error::Conflict(_)),
        "{refused}"
    );
    assert_eq!(
        app.store.find_client(None, client.id).await.unwrap(),
        before
    );
    // Without an overlap the old ones lapse at once: always allowed.
    let (credential, _) = posture_domain::oauth::NewCredential::secret().unwrap();
    let now = chrono::Utc::now();
    let rotated = app
        .store
        .add_client_credential(None, client.id, credential, now, &Actor::Operator)
        .await
        .unwrap();
    assert_eq!(
        rotated
            .credentials
            .iter()
            .filter(|c| c.valid_at(now))
            .count(),
        1
    );
    // The original secret stops with them.
    let response = token_request(
        &app,
        "grant_type=client_credentials",
        Some(&basic(&client.client_id, client.secret.as_deref().unwrap())),
    )
    .await;
    assert_eq!(response.status(), 401);
}

#[tokio::test]
async fn a_token_waiting_on_the_events_feed_is_let_go_when_its_client_is_revoked() {
    let app = std::sync::Arc::new(TestApp::start().await);
    let (scope, tenant) = app.customer("Contoso").await;
    let issued = client(&app, scope, &[Scope::ReadFindings], None).await;
    let token = token(&app, &issued, "").await;
    let u1 = posture_test_support::fixtures::identity("u1", &tenant, "Ada");
    let f1 = posture_test_support::fixtures::finding("f1", &tenant, "high", "open", "u1");
    app.ingest(scope, &[u1.clone(), f1.clone()]).await;
    let first = app.get_json("/api/v1/events", &token, StatusCode::OK).await;
    let last = first["meta"]["nextCursor"].as_str().unwrap().to_owned();
    let waiter = tokio::spawn({
        let (app, token) = (app.clone(), token.clone());
        async move {
            app.get(&format!("/api/v1/events?after={last}&wait=30"), &token)
                .await
                .status()
        }
    });
    wait_for(
        "the token's request waiting",
        Duration::from_secs(10),
        || async { (app.event_waits.waiting() == 1).then_some(()) },
    )
    .await;
    app.store
        .revoke_client(None, issued.id, &Actor::Operator)
        .await
        .unwrap();
    wait_for("the revocation heard", Duration::from_secs(10), || async {
        let status = app.get("/api/v1/keys/current", &token).await.status();
        (status == StatusCode::UNAUTHORIZED).then_some(())
    })
    .await;
    let f2 = posture_test_support::fixtures::finding("f2", &tenant, "critical", "open", "u1");
    app.ingest(scope, &[u1, f1, f2]).await;
    assert_eq!(waiter.await.unwrap(), StatusCode::UNAUTHORIZED);
    assert_eq!(app.event_waits.waiting(), 0, "its place is given back");
}
