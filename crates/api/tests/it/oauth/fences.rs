//! A client's allow-list at the token endpoint and on its tokens, and the token endpoint's
//! aggregated line in the audit log.

use posture_domain::{
    Scope, allow_list::AllowList, audit::AuditAction, console::Actor, ports::ApiKeyRepository,
};
use reqwest::header;

use super::{basic, client, oauth_error};
use crate::{support::TestApp, waits::wait_for};

async fn token_from(app: &TestApp, id: &str, secret: &str, from: &str) -> reqwest::Response {
    app.client
        .post(app.url("/oauth/token"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::AUTHORIZATION, basic(id, secret))
        .header("x-forwarded-for", from)
        .body("grant_type=client_credentials")
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_fenced_client_gets_tokens_from_its_networks_only_and_they_work_there_only() {
    let app = TestApp::behind_trusted_proxy_with_clock().await;
    let (customer, _) = app.customer("A").await;
    let issued = client(&app, customer, &[Scope::ReadIdentities], None).await;
    let secret = issued.secret.clone().unwrap();
    app.store
        .set_allow_list(
            None,
            issued.id,
            AllowList::parse(&["198.51.100.0/24"]).unwrap(),
            &Actor::Operator,
        )
        .await
        .unwrap();
    // From elsewhere: refused as RFC 6749 words it, before any token is made.
    let outside = token_from(&app, &issued.client_id, &secret, "203.0.113.5").await;
    assert_eq!(
        oauth_error(outside).await,
        (400, "unauthorized_client".to_owned())
    );
    let refused = AuditAction::ClientRefusedByAllowList;
    let line = wait_for(|| async {
        let lines = app.audit_lines(customer).await;
        lines.into_iter().find(|l| l.action == refused.as_str())
    })
    .await;
    assert_eq!(line.source_ip, Some("203.0.113.5".parse().unwrap()));
    // From inside: a token, which works from inside and not from outside.
    let inside = token_from(&app, &issued.client_id, &secret, "198.51.100.7").await;
    assert_eq!(inside.status(), 200);
    let body: serde_json::Value = inside.json().await.unwrap();
    let token = body["access_token"].as_str().unwrap().to_owned();
    let from = |address: &'static str| {
        let request = app
            .client
            .get(app.url("/api/v1/identities"))
            .bearer_auth(&token)
            .header("x-forwarded-for", address);
        async move { request.send().await.unwrap().status() }
    };
    assert_eq!(from("198.51.100.9").await, 200);
    assert_eq!(from("203.0.113.5").await, 403);
    // Tokens issued: one line per client and hour, however many are issued.
    for _ in 0..3 {
        let again = token_from(&app, &issued.client_id, &secret, "198.51.100.7").await;
        assert_eq!(again.status(), 200);
    }
    let issued_action = AuditAction::ClientTokensIssued.as_str();
    let count = || async {
        let lines = app.audit_lines(customer).await;
        lines.iter().filter(|l| l.action == issued_action).count()
    };
    wait_for(|| async { (count().await == 1).then_some(()) }).await;
    let line = app
        .audit_lines(customer)
        .await
        .into_iter()
        .find(|l| l.action == issued_action)
        .unwrap();
    assert_eq!(line.key.as_ref().unwrap().id, issued.id);
    assert_eq!(line.source_ip, Some("198.51.100.7".parse().unwrap()));
    app.clock().advance(std::time::Duration::from_secs(3600));
    let next_hour = token_from(&app, &issued.client_id, &secret, "198.51.100.7").await;
    assert_eq!(next_hour.status(), 200);
    wait_for(|| async { (count().await == 2).then_some(()) }).await;
}
