//! `private_key_jwt`: tokens for assertions signed with a client's private key.

use jsonwebtoken::Algorithm;
use posture_domain::Scope;
use reqwest::StatusCode;
use serde_json::Value;

use super::{
    EC_PRIVATE, EC_PUBLIC, RSA_PRIVATE, RSA_PUBLIC, assertion, client, oauth_error, token_request,
};
use crate::support::TestApp;

const TYPE: &str = "urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer";

fn form(assertion: &str) -> String {
    format!(
        "grant_type=client_credentials&client_assertion_type={TYPE}&client_assertion={assertion}"
    )
}

#[tokio::test]
async fn rs256_and_es256_assertions_get_tokens_and_a_replay_is_refused() {
    let app = TestApp::start().await;
    let (scope, _) = app.customer_with_one_of_each("Contoso").await;
    let endpoint = app.url("/oauth/token");
    for (alg, private, public) in [
        (Algorithm::RS256, RSA_PRIVATE, RSA_PUBLIC),
        (Algorithm::ES256, EC_PRIVATE, EC_PUBLIC),
    ] {
        let client = client(&app, scope, &[Scope::ReadFindings], Some(public)).await;
        assert!(client.secret.is_none());
        let signed = assertion(&client.client_id, &endpoint, alg, private, "jti-1");
        let response = token_request(&app, &form(&signed), None).await;
        assert_eq!(response.status(), 200, "{alg:?}");
        let body: Value = response.json().await.unwrap();
        let token = body["access_token"].as_str().unwrap();
        app.get_json("/api/v1/findings", token, StatusCode::OK)
            .await;
        // The same assertion again: refused, and it says why.
        let replayed = token_request(&app, &form(&signed), None).await;
        assert_eq!(
            oauth_error(replayed).await,
            (400, "invalid_client".to_owned())
        );
        // With the client_id in the form too, and the issuer as the audience.
        let signed = assertion(&client.client_id, &app.base, alg, private, "jti-2");
        let with_id = format!("{}&client_id={}", form(&signed), client.client_id);
        assert_eq!(token_request(&app, &with_id, None).await.status(), 200);
    }
}

#[tokio::test]
async fn an_assertion_for_another_audience_or_signed_by_another_key_is_refused() {
    let app = TestApp::start().await;
    let (scope, _) = app.customer("Contoso").await;
    let client = client(&app, scope, &[Scope::ReadFindings], Some(EC_PUBLIC)).await;
    let elsewhere = assertion(
        &client.client_id,
        "https://elsewhere.example/oauth/token",
        Algorithm::ES256,
        EC_PRIVATE,
        "a",
    );
    let response = token_request(&app, &form(&elsewhere), None).await;
    assert_eq!(
        oauth_error(response).await,
        (400, "invalid_client".to_owned())
    );
    // The RSA key is not this client's.
    let other_key = assertion(
        &client.client_id,
        &app.url("/oauth/token"),
        Algorithm::RS256,
        RSA_PRIVATE,
        "b",
    );
    let response = token_request(&app, &form(&other_key), None).await;
    assert_eq!(
        oauth_error(response).await,
        (400, "invalid_client".to_owned())
    );
    // A key client has no secret to present.
    let form = format!(
        "grant_type=client_credentials&client_id={}&client_secret=pcs_x",
        client.client_id
    );
    let response = token_request(&app, &form, None).await;
    assert_eq!(
        oauth_error(response).await,
        (400, "invalid_client".to_owned())
    );
}
