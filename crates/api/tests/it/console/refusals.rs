//! A person the identity provider signs in who may not be an admin: a page in words, no
//! session, and a line of the customer's audit log.

use reqwest::StatusCode;

use super::{
    provider::{claims, console_with_provider, session_cookie, sign_in},
    support::html,
};
use crate::support::TestApp;

#[tokio::test]
async fn a_user_who_is_not_an_admin_gets_a_403_page_and_no_session() {
    let app = TestApp::start().await;
    let (provider, customer) = console_with_provider(&app).await;
    let response = sign_in(&app, &provider, &customer, &[], |nonce| {
        claims(&provider, "bob", &["staff"], nonce)
    })
    .await;
    assert!(session_cookie(&response).is_none());
    let body = html(response, StatusCode::FORBIDDEN).await;
    assert!(body.contains("You are not an admin of this organisation"));
    assert!(body.contains("User bob") && body.contains("Contoso"));
    // The refusal is in the customer's audit log: who, from where, why.
    let scope = posture_domain::CustomerScope::for_operator(customer.parse().unwrap());
    let refused: Vec<_> = app
        .audit_lines(scope)
        .await
        .into_iter()
        .filter(|l| l.action == "session.refused")
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].actor_kind, "admin");
    assert_eq!(refused[0].source_ip, Some("127.0.0.1".parse().unwrap()));
    assert!(
        refused[0]
            .detail
            .as_deref()
            .unwrap()
            .contains("not an admin"),
        "{:?}",
        refused[0].detail
    );
}
