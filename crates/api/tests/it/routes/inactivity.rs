//! The customer's inactivity rule: a credential unused that long stops working (401 saying
//! why), with a notice a week before, in the audit log; and the operator commands that set
//! the rule and fence credentials, run as the real binary.

use std::time::Duration;

use posture_domain::{Scope, console::Actor, ports::AuditRepository};
use reqwest::StatusCode;
use serde_json::Value;

use crate::{
    cli::{json_of, posture_api},
    support::TestApp,
    waits::wait_for,
};

const DAY: Duration = Duration::from_secs(86_400);

#[tokio::test]
async fn a_key_unused_past_the_rule_stops_working_saying_why_after_a_notice() {
    let app = TestApp::with_clock().await;
    let (customer, _) = app.customer("A").await;
    let (key_id, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let (_, unruled) = app.key(customer, &[Scope::ReadIdentities]).await;
    app.store
        .set_inactivity(customer, Some(30), &Actor::Operator)
        .await
        .unwrap();
    assert_eq!(app.store.inactivity(customer).await.unwrap(), Some(30));
    assert_eq!(
        app.get("/api/v1/identities", &key).await.status(),
        StatusCode::OK
    );
    // Its use is recorded: the rule counts from it.
    wait_for(|| async {
        let keys = posture_domain::ports::ApiKeyRepository::list_keys(&app.store, customer)
            .await
            .unwrap();
        keys.iter()
            .find(|k| k.id == key_id)
            .and_then(|k| k.last_used_at)
    })
    .await;
    // 24 days on: the notice (once, however often the worker looks).
    app.clock().advance(24 * DAY);
    let noticed = app.store.notice_inactive_soon(app.now()).await.unwrap();
    assert_eq!(noticed, 2, "both keys are within a week of lapsing");
    app.store.notice_inactive_soon(app.now()).await.unwrap();
    let lines = app.audit_lines(customer).await;
    let notices: Vec<_> = lines
        .iter()
        .filter(|l| l.action == "key.inactive_soon")
        .collect();
    assert_eq!(notices.len(), 2);
    assert_eq!(notices[0].actor_kind, "system");
    assert!(
        notices[0]
            .detail
            .as_deref()
            .unwrap()
            .contains("30 days unused")
    );
    // 31 days after its last use: refused, saying why, and the refusal is audited.
    app.clock().advance(7 * DAY);
    let refused = app.get("/api/v1/identities", &key).await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "unauthorized");
    assert!(
        body["reason"]
            .as_str()
            .unwrap()
            .contains("has not been used for 30 days"),
        "{body}"
    );
    wait_for(|| async {
        let lines = app.audit_lines(customer).await;
        lines
            .into_iter()
            .find(|l| l.action == "key.expired_inactive")
    })
    .await;
    // The rule cleared, the key works again (it was never revoked).
    app.store
        .set_inactivity(customer, None, &Actor::Operator)
        .await
        .unwrap();
    assert_eq!(
        app.get("/api/v1/identities", &unruled).await.status(),
        StatusCode::OK
    );
    let set: Vec<_> = app
        .audit_lines(customer)
        .await
        .into_iter()
        .filter(|l| l.action == "inactivity.set")
        .collect();
    assert_eq!(set.len(), 2);
    assert_eq!(
        set[0].detail.as_deref(),
        Some("credentials stop working never (was after 30 days unused)")
    );
    let out_of_range = app
        .store
        .set_inactivity(customer, Some(3), &Actor::Operator)
        .await;
    assert!(matches!(
        out_of_range,
        Err(posture_domain::Error::Invalid { .. })
    ));
}

#[tokio::test]
async fn a_lapsed_client_gets_no_token_and_its_attempt_does_not_bring_it_back() {
    let app = TestApp::with_clock().await;
    let (customer, _) = app.customer("A").await;
    let issued = crate::oauth::client(&app, customer, &[Scope::ReadIdentities], None).await;
    let secret = issued.secret.clone().unwrap();
    app.store
        .set_inactivity(customer, Some(30), &Actor::Operator)
        .await
        .unwrap();
    // Never used: 31 days after its issue it has lapsed.
    app.clock().advance(31 * DAY);
    let refused = crate::oauth::token_request(
        &app,
        "grant_type=client_credentials",
        Some(&crate::oauth::basic(&issued.client_id, &secret)),
    )
    .await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "invalid_client");
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("has not been used for 30 days"),
        "{body}"
    );
    // The attempt is no use: the client's last use is still none, and so it stays lapsed.
    let listed = posture_domain::ports::ClientRepository::find_client(&app.store, None, issued.id)
        .await
        .unwrap();
    assert_eq!(listed.last_used_at, None);
    wait_for(|| async {
        let lines = app.audit_lines(customer).await;
        lines
            .into_iter()
            .find(|l| l.action == "client.expired_inactive")
    })
    .await;
    // A wrong secret is refused as any unknown client: the lapse is said only to the client.
    let wrong = crate::oauth::token_request(
        &app,
        "grant_type=client_credentials",
        Some(&crate::oauth::basic(&issued.client_id, "pcs_wrong")),
    )
    .await;
    let body: Value = wrong.json().await.unwrap();
    assert!(
        !body["error_description"]
            .as_str()
            .unwrap()
            .contains("30 days")
    );
}

#[tokio::test]
async fn operators_set_the_rule_and_fence_keys_and_clients_with_the_real_binary() {
    let app = TestApp::start().await;
    let db = &app.db;
    let customer = json_of(&posture_api(
        db,
        &["customers", "create", "--name", "Contoso", "--json"],
        None,
    ));
    let customer = customer["id"].as_str().unwrap();
    let rule = json_of(&posture_api(
        db,
        &[
            "customers",
            "inactivity",
            "--customer",
            customer,
            "--days",
            "90",
            "--json",
        ],
        None,
    ));
    assert_eq!(rule["inactivityDays"], 90);
    let key = json_of(&posture_api(
        db,
        &[
            "keys",
            "issue",
            "--customer",
            customer,
            "--scope",
            "read:identities",
            "--allow-from",
            "198.51.100.0/24",
            "--allow-from",
            "2001:db8::1",
            "--json",
        ],
        None,
    ));
    assert_eq!(
        key["allowFrom"],
        serde_json::json!(["198.51.100.0/24", "2001:db8::1/128"])
    );
    // Loopback is not in the list: refused.
    let secret = key["key"].as_str().unwrap();
    let refused = app.get("/api/v1/identities", secret).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let id = key["id"].as_str().unwrap();
    let opened = json_of(&posture_api(
        db,
        &["keys", "allow-from", id, "127.0.0.1", "--json"],
        None,
    ));
    assert_eq!(opened["allowFrom"], serde_json::json!(["127.0.0.1/32"]));
    // The change reaches the server's cache by its notification, a moment later.
    wait_for(|| async {
        let status = app.get("/api/v1/identities", secret).await.status();
        (status == StatusCode::OK).then_some(())
    })
    .await;
    let listed = json_of(&posture_api(
        db,
        &["keys", "list", "--customer", customer, "--json"],
        None,
    ));
    let listed = &listed["data"][0];
    wait_for(|| async {
        let listed = json_of(&posture_api(
            db,
            &["keys", "list", "--customer", customer, "--json"],
            None,
        ));
        (listed["data"][0]["lastUsedFrom"] == "127.0.0.1").then_some(())
    })
    .await;
    assert_eq!(listed["allowFrom"], serde_json::json!(["127.0.0.1/32"]));
    let bad = posture_api(db, &["keys", "allow-from", id, "10.0.0.0/33"], None);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--allow-from"));
    let client = json_of(&posture_api(
        db,
        &[
            "clients",
            "issue",
            "--customer",
            customer,
            "--name",
            "siem",
            "--scope",
            "read:audit",
            "--allow-from",
            "203.0.113.0/24",
            "--json",
        ],
        None,
    ));
    assert_eq!(client["allowFrom"], serde_json::json!(["203.0.113.0/24"]));
    let anywhere = json_of(&posture_api(
        db,
        &[
            "clients",
            "allow-from",
            client["clientId"].as_str().unwrap(),
            "--anywhere",
            "--json",
        ],
        None,
    ));
    assert_eq!(anywhere["allowFrom"], serde_json::json!([]));
    let off = json_of(&posture_api(
        db,
        &[
            "customers",
            "inactivity",
            "--customer",
            customer,
            "--off",
            "--json",
        ],
        None,
    ));
    assert!(off["inactivityDays"].is_null());
}
