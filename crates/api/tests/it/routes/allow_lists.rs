//! Where a credential may be used from (its allow-list), and where it was last used from:
//! over HTTP, with the client's address as the server sees it (the peer, or behind the
//! trusted proxy the `X-Forwarded-For` it believes).

use std::time::Duration;

use posture_domain::{
    Scope, allow_list::AllowList, audit::AuditAction, console::Actor, ports::ApiKeyRepository,
};
use reqwest::StatusCode;
use serde_json::Value;

use crate::{support::TestApp, waits::wait_for};

/// `GET path` with `key`, from `forwarded` as the trusted proxy says (none: the peer).
async fn get_from(
    app: &TestApp,
    path: &str,
    key: &str,
    forwarded: Option<&str>,
) -> reqwest::Response {
    let mut request = app.client.get(app.url(path)).bearer_auth(key);
    if let Some(address) = forwarded {
        request = request.header("x-forwarded-for", address);
    }
    request.send().await.unwrap()
}

async fn refused_by_allow_list(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"], "forbidden", "{body}");
    body
}

fn lines_of(lines: &[posture_domain::console::AuditEvent], action: AuditAction) -> usize {
    lines.iter().filter(|l| l.action == action.as_str()).count()
}

#[tokio::test]
async fn a_key_works_from_its_networks_only_and_the_refusal_names_none_of_them() {
    let app = TestApp::behind_trusted_proxy().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app
        .key_allowed_from(
            customer,
            &[Scope::ReadIdentities],
            &["198.51.100.0/24", "2001:db8:7::/48"],
        )
        .await;
    for inside in ["198.51.100.7", "2001:db8:7:1::9", "::ffff:198.51.100.8"] {
        let response = get_from(&app, "/api/v1/identities", &key, Some(inside)).await;
        assert_eq!(response.status(), StatusCode::OK, "{inside}");
    }
    for outside in [
        "203.0.113.5",
        "2001:db8:8::1",
        "::ffff:203.0.113.5",
        "::198.51.100.7",
    ] {
        let response = get_from(&app, "/api/v1/identities", &key, Some(outside)).await;
        let body = refused_by_allow_list(response).await;
        let reason = body["reason"].as_str().unwrap();
        assert!(
            !reason.contains("198.51") && !reason.contains("2001:db8"),
            "the reason reveals the allowed networks: {reason}"
        );
    }
    // The direct peer (loopback) is not in the list either.
    refused_by_allow_list(get_from(&app, "/api/v1/identities", &key, None).await).await;
}

#[tokio::test]
async fn a_forwarded_address_from_an_untrusted_peer_is_not_believed() {
    // No trusted proxy: the peer (loopback) is the client, whatever the header says.
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, fenced) = app
        .key_allowed_from(customer, &[Scope::ReadIdentities], &["198.51.100.0/24"])
        .await;
    let spoofed = get_from(&app, "/api/v1/identities", &fenced, Some("198.51.100.7")).await;
    refused_by_allow_list(spoofed).await;
    let (_, local) = app
        .key_allowed_from(customer, &[Scope::ReadIdentities], &["127.0.0.0/8"])
        .await;
    let response = get_from(&app, "/api/v1/identities", &local, Some("198.51.100.7")).await;
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_refusal_counts_against_the_address_never_the_key() {
    let app = TestApp::behind_trusted_proxy().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app
        .key_allowed_from(customer, &[Scope::ReadIdentities], &["198.51.100.0/24"])
        .await;
    let refused = get_from(&app, "/api/v1/identities", &key, Some("203.0.113.5")).await;
    assert_eq!(
        refused.headers()["ratelimit-policy"]
            .to_str()
            .unwrap()
            .split(';')
            .next(),
        Some("\"per-address\"")
    );
    refused_by_allow_list(refused).await;
    let allowed = get_from(&app, "/api/v1/identities", &key, Some("198.51.100.7")).await;
    assert_eq!(allowed.status(), StatusCode::OK);
    // The key's first counted request: its whole quota but this one is left.
    let remaining: u32 = allowed.headers()["x-ratelimit-remaining"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let limit: u32 = allowed.headers()["x-ratelimit-limit"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(remaining, limit - 1);
}

#[tokio::test]
async fn refusals_reach_the_audit_log_once_per_key_address_and_hour() {
    let app = TestApp::behind_trusted_proxy_with_clock().await;
    let (customer, _) = app.customer("A").await;
    let (key_id, key) = app
        .key_allowed_from(customer, &[Scope::ReadIdentities], &["198.51.100.0/24"])
        .await;
    for _ in 0..5 {
        let response = get_from(&app, "/api/v1/identities", &key, Some("203.0.113.5")).await;
        refused_by_allow_list(response).await;
    }
    let refused = AuditAction::KeyRefusedByAllowList;
    let line = wait_for(|| async {
        let lines = app.audit_lines(customer).await;
        lines.into_iter().find(|l| l.action == refused.as_str())
    })
    .await;
    assert_eq!(line.key.as_ref().unwrap().id, key_id);
    assert_eq!(line.source_ip, Some("203.0.113.5".parse().unwrap()));
    assert_eq!(line.actor_kind, "key");
    // A second address is a line of its own; the first one's refusals add none.
    refused_by_allow_list(get_from(&app, "/api/v1/identities", &key, Some("203.0.113.6")).await)
        .await;
    wait_for(|| async { (lines_of(&app.audit_lines(customer).await, refused) == 2).then_some(()) })
        .await;
    // Another hour: the address's refusal is logged again.
    app.clock().advance(Duration::from_secs(3600));
    refused_by_allow_list(get_from(&app, "/api/v1/identities", &key, Some("203.0.113.5")).await)
        .await;
    wait_for(|| async { (lines_of(&app.audit_lines(customer).await, refused) == 3).then_some(()) })
        .await;
}

#[tokio::test]
async fn a_changed_allow_list_applies_at_once_and_is_audited() {
    let app = TestApp::behind_trusted_proxy().await;
    let (customer, _) = app.customer("A").await;
    let (key_id, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let from = Some("203.0.113.5");
    assert_eq!(
        get_from(&app, "/api/v1/identities", &key, from)
            .await
            .status(),
        StatusCode::OK
    );
    let fenced = AllowList::parse(&["198.51.100.0/24"]).unwrap();
    let key_row = app
        .store
        .set_allow_list(Some(customer), key_id, fenced.clone(), &Actor::Operator)
        .await
        .unwrap();
    assert_eq!(key_row.allow_from, fenced);
    // The cached principal is forgotten: the next request is refused.
    refused_by_allow_list(get_from(&app, "/api/v1/identities", &key, from).await).await;
    let current = app
        .get_json_from("/api/v1/keys/current", &key, "198.51.100.9")
        .await;
    assert_eq!(
        current["data"]["allowFrom"],
        serde_json::json!(["198.51.100.0/24"])
    );
    // Setting the same list again changes nothing and logs nothing more.
    app.store
        .set_allow_list(None, key_id, fenced, &Actor::Operator)
        .await
        .unwrap();
    let lines = app.audit_lines(customer).await;
    assert_eq!(lines_of(&lines, AuditAction::KeyAllowListChanged), 1);
    let changed = lines
        .iter()
        .find(|l| l.action == "key.allow_list_changed")
        .unwrap();
    assert_eq!(
        changed.detail.as_deref(),
        Some("allowed from 198.51.100.0/24 (was any address)")
    );
    // Another customer's key cannot be fenced by this customer.
    let (other, _) = app.customer("B").await;
    let refused = app
        .store
        .set_allow_list(Some(other), key_id, AllowList::default(), &Actor::Operator)
        .await;
    assert!(matches!(refused, Err(posture_domain::Error::NotFound)));
}

#[tokio::test]
async fn the_last_use_says_where_from_and_a_new_address_is_audited_once() {
    let app = TestApp::behind_trusted_proxy().await;
    let (customer, _) = app.customer("A").await;
    let (key_id, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let hostile_agent = format!("probe/1.0 {}", "x".repeat(400));
    for _ in 0..3 {
        let response = app
            .client
            .get(app.url("/api/v1/identities"))
            .bearer_auth(&key)
            .header("x-forwarded-for", "198.51.100.7")
            .header("user-agent", &hostile_agent)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    let current = wait_for(|| async {
        let body = app
            .get_json_from("/api/v1/keys/current", &key, "198.51.100.7")
            .await;
        (!body["data"]["lastUsedUserAgent"].is_null()).then_some(body)
    })
    .await;
    assert_eq!(current["data"]["lastUsedFrom"], "198.51.100.7");
    let agent = current["data"]["lastUsedUserAgent"].as_str().unwrap();
    assert!(
        agent.starts_with("probe/1.0 xxx") && agent.len() <= 200,
        "{agent}"
    );
    let new_address = AuditAction::KeyUsedFromNewAddress;
    let line = wait_for(|| async {
        let lines = app.audit_lines(customer).await;
        lines.into_iter().find(|l| l.action == new_address.as_str())
    })
    .await;
    assert_eq!(line.key.as_ref().unwrap().id, key_id);
    assert_eq!(line.source_ip, Some("198.51.100.7".parse().unwrap()));
    assert!(
        line.detail
            .as_deref()
            .unwrap()
            .starts_with("first use from 198.51.100.7")
    );
    // A second address: a second line; the first address again adds none.
    assert_eq!(
        get_from(&app, "/api/v1/identities", &key, Some("2001:db8::5"))
            .await
            .status(),
        StatusCode::OK
    );
    wait_for(|| async {
        (lines_of(&app.audit_lines(customer).await, new_address) == 2).then_some(())
    })
    .await;
    let listed = app.store.list_keys(customer).await.unwrap();
    assert!(listed[0].last_used_from.is_some());
}

#[tokio::test]
async fn a_request_waiting_on_the_feed_is_let_go_when_its_address_is_fenced_out() {
    let app = std::sync::Arc::new(TestApp::start().await);
    let (customer, _) = app.customer("A").await;
    let (key_id, key) = app.key(customer, &[Scope::ReadFindings]).await;
    let waiter = tokio::spawn({
        let (app, key) = (app.clone(), key.clone());
        async move { app.get("/api/v1/events?wait=30", &key).await.status() }
    });
    wait_for(|| async { (app.event_waits.waiting() == 1).then_some(()) }).await;
    let elsewhere = AllowList::parse(&["198.51.100.0/24"]).unwrap();
    app.store
        .set_allow_list(Some(customer), key_id, elsewhere, &Actor::Operator)
        .await
        .unwrap();
    // The wait re-checks its key each second: fenced away from loopback, it ends.
    let status = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("let go within the re-check")
        .unwrap();
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(app.event_waits.waiting(), 0, "its place is given back");
}
