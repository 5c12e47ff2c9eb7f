//! `GET /api/v1/keys/current`: the calling key, described to its holder (docs/api.md,
//! "The calling key").

use chrono::{DateTime, Duration, Utc};
use posture_domain::{Scope, console::Actor, ports::ApiKeyRepository};
use reqwest::StatusCode;

use crate::{
    support::{TestApp, assert_error},
    waits::wait_for,
};

fn time(value: &serde_json::Value) -> DateTime<Utc> {
    value.as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn the_current_key_gives_its_scopes_customer_and_lifetime_but_never_its_secret() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("Contoso").await;
    let expires = Utc::now() + Duration::days(30);
    let (id, key) = app
        .key_expiring(
            customer,
            &[Scope::ManageWebhooks, Scope::ReadFindings],
            Some(expires),
        )
        .await;
    let response = app.get("/api/v1/keys/current", &key).await;
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    assert!(!text.contains(&key), "the secret is never returned");
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    let data = &body["data"];
    assert_eq!(data["id"], id.to_string());
    assert_eq!(data["name"], "test");
    let prefix = data["prefix"].as_str().unwrap();
    assert!(
        prefix.starts_with("svc_") && key.starts_with(prefix),
        "{prefix}"
    );
    assert!(prefix.len() < key.len());
    // The scopes in their fixed order, not the order they were asked for.
    assert_eq!(
        data["scopes"],
        serde_json::json!(["read:findings", "manage:webhooks"])
    );
    assert_eq!(data["customer"]["id"], customer.customer_id().to_string());
    assert_eq!(data["customer"]["name"], "Contoso");
    assert!(
        (time(&data["expiresAt"]) - expires)
            .num_milliseconds()
            .abs()
            < 1000
    );
    assert!(Utc::now() - time(&data["createdAt"]) < Duration::minutes(1));
}

#[tokio::test]
async fn any_valid_key_may_describe_itself_whatever_its_scopes() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    // A key whose only scope opens no other route.
    let (_, key) = app.key(customer, &[Scope::ProvisionScim]).await;
    let body = app
        .get_json("/api/v1/keys/current", &key, StatusCode::OK)
        .await;
    assert_eq!(
        body["data"]["scopes"],
        serde_json::json!(["provision:scim"])
    );
    assert_eq!(body["data"]["expiresAt"], serde_json::Value::Null);
}

#[tokio::test]
async fn each_key_sees_itself_and_its_own_customer_only() {
    let app = TestApp::start().await;
    let (a, _) = app.customer("A").await;
    let (b, _) = app.customer("B").await;
    let (a_id, a_key) = app.key(a, &[Scope::ReadIdentities]).await;
    let (b_id, b_key) = app.key(b, &[Scope::ReadIdentities]).await;
    for (id, key, customer, name) in [(a_id, a_key, a, "A"), (b_id, b_key, b, "B")] {
        let body = app
            .get_json("/api/v1/keys/current", &key, StatusCode::OK)
            .await;
        assert_eq!(body["data"]["id"], id.to_string());
        assert_eq!(
            body["data"]["customer"]["id"],
            customer.customer_id().to_string()
        );
        assert_eq!(body["data"]["customer"]["name"], name);
    }
}

#[tokio::test]
async fn last_used_at_is_reported_once_recorded_and_written_at_most_once_a_minute() {
    let app = TestApp::with_clock().await;
    // With the key cache live, every use after the first is served from the cache: those
    // uses count too.
    app.key_cache_live().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let first_use = app.now();
    let last_used = || async {
        let body = app
            .get_json("/api/v1/keys/current", &key, StatusCode::OK)
            .await;
        (!body["data"]["lastUsedAt"].is_null()).then(|| time(&body["data"]["lastUsedAt"]))
    };
    // The first use is recorded off the request path: wait until it shows.
    let started = app.store.key_touches_started();
    assert_eq!(
        wait_for(|| async { last_used().await.filter(|t| *t == first_use) }).await,
        first_use
    );
    assert_eq!(app.store.key_touches_started(), started + 1);
    // More uses within the minute decide no write (counted when decided, on the request).
    app.clock().advance(std::time::Duration::from_secs(59));
    for _ in 0..5 {
        app.get("/api/v1/identities", &key).await;
    }
    assert_eq!(app.store.key_touches_started(), started + 1);
    assert_eq!(last_used().await, Some(first_use));
    // A use a minute after the write is recorded.
    app.clock().advance(std::time::Duration::from_secs(1));
    let later = app.now();
    app.get("/api/v1/identities", &key).await;
    assert_eq!(app.store.key_touches_started(), started + 2);
    assert_eq!(
        wait_for(|| async { last_used().await.filter(|t| *t == later) }).await,
        later
    );
}

#[tokio::test]
async fn the_current_key_is_never_conditional() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let response = app.get("/api/v1/keys/current", &key).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("etag").is_none());
    let again = app
        .client
        .get(app.url("/api/v1/keys/current"))
        .bearer_auth(&key)
        .header("If-None-Match", "*")
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_revoked_or_expired_key_cannot_describe_itself() {
    let app = TestApp::with_clock().await;
    let (customer, _) = app.customer("A").await;
    let (id, revoked) = app.key(customer, &[Scope::ReadIdentities]).await;
    app.get_json("/api/v1/keys/current", &revoked, StatusCode::OK)
        .await;
    app.store
        .revoke_key(None, id, &Actor::Operator)
        .await
        .unwrap();
    let (_, expired) = app
        .key_expiring(
            customer,
            &[Scope::ReadIdentities],
            Some(app.now() + Duration::minutes(5)),
        )
        .await;
    app.get_json("/api/v1/keys/current", &expired, StatusCode::OK)
        .await;
    app.clock().advance(std::time::Duration::from_secs(301));
    for key in [revoked, expired, "svc_nonsense".to_owned()] {
        assert_error(
            app.get("/api/v1/keys/current", &key).await,
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        )
        .await;
    }
}

/// The scopes of docs/api.md's table, in its order.
fn documented_scopes() -> Vec<String> {
    let api =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md")).unwrap();
    let table = api
        .split("### Scopes")
        .nth(1)
        .expect("docs/api.md has a Scopes section");
    table
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .map(|cell| cell.split('`').next().unwrap().to_owned())
        .take_while(|scope| scope.contains(':'))
        .collect()
}

#[tokio::test]
async fn a_key_lists_its_scopes_in_the_order_of_the_documented_table() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let documented = documented_scopes();
    assert_eq!(documented.len(), Scope::ALL.len(), "{documented:?}");
    // Asked for in reverse, answered in the table's order.
    let reversed: Vec<Scope> = Scope::ALL.iter().rev().copied().collect();
    let (_, key) = app.key(customer, &reversed).await;
    let body = app
        .get_json("/api/v1/keys/current", &key, StatusCode::OK)
        .await;
    assert_eq!(body["data"]["scopes"], serde_json::json!(documented));
}
