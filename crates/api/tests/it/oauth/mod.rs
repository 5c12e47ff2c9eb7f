//! OAuth 2.0 client credentials end to end: clients issued through the store, tokens from
//! `POST /oauth/token` over real HTTP, and the tokens at `/api/v1` and `/scim/v2`.

mod assertions;
mod fences;
mod hostile;
mod operator;
mod tokens;

use chrono::Utc;
use posture_domain::{
    CustomerScope, KeyId, Scope, ScopeSet,
    console::Actor,
    oauth::{ClientPublicKey, NewClient},
    ports::ClientRepository,
};
use reqwest::{Response, header};
use serde_json::Value;

use crate::support::TestApp;

pub const RSA_PRIVATE: &str = include_str!("../../../../domain/src/oauth/fixtures/rsa-private.pem");
pub const RSA_PUBLIC: &str = include_str!("../../../../domain/src/oauth/fixtures/rsa-public.pem");
pub const EC_PRIVATE: &str = include_str!("../../../../domain/src/oauth/fixtures/ec-private.pem");
pub const EC_PUBLIC: &str = include_str!("../../../../domain/src/oauth/fixtures/ec-public.pem");

/// A client issued to the customer: its row's id, its client_id, and its secret (none for
/// a key client).
pub struct Client {
    pub id: KeyId,
    pub client_id: String,
    pub secret: Option<String>,
}

pub async fn client(
    app: &TestApp,
    scope: CustomerScope,
    scopes: &[Scope],
    public_key: Option<&str>,
) -> Client {
    let scopes: ScopeSet = scopes.iter().copied().collect();
    let key = public_key.map(|pem| ClientPublicKey::from_pem(pem).unwrap());
    let (new, secret) =
        NewClient::generate(scope.customer_id(), "test client".into(), scopes, key).unwrap();
    let issued = app
        .store
        .insert_client(new, &Actor::Operator)
        .await
        .unwrap();
    Client {
        id: issued.id,
        client_id: issued.client_id(),
        secret: secret.map(|s| s.expose().to_owned()),
    }
}

/// `POST /oauth/token` with this form body (and the header, if any).
pub async fn token_request(app: &TestApp, form: &str, authorization: Option<&str>) -> Response {
    let mut request = app
        .client
        .post(app.url("/oauth/token"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form.to_owned());
    if let Some(value) = authorization {
        request = request.header(header::AUTHORIZATION, value);
    }
    request.send().await.unwrap()
}

/// `Basic` of `id:secret`.
pub fn basic(id: &str, secret: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
    )
}

/// The status of a token request by Basic with this id and secret.
pub async fn token_status(app: &TestApp, id: &str, secret: &str) -> reqwest::StatusCode {
    token_request(
        app,
        "grant_type=client_credentials",
        Some(&basic(id, secret)),
    )
    .await
    .status()
}

/// A token for a secret client (by Basic), with the form's extra parameters.
pub async fn token(app: &TestApp, client: &Client, extra: &str) -> String {
    let response = token_request(
        app,
        &format!("grant_type=client_credentials{extra}"),
        Some(&basic(&client.client_id, client.secret.as_deref().unwrap())),
    )
    .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    body["access_token"].as_str().unwrap().to_owned()
}

/// A signed assertion of `client` for `aud`, expiring in an hour.
pub fn assertion(
    client_id: &str,
    aud: &str,
    alg: jsonwebtoken::Algorithm,
    pem: &str,
    jti: &str,
) -> String {
    let now = Utc::now().timestamp();
    let claims = serde_json::json!({
        "iss": client_id, "sub": client_id, "aud": aud,
        "iat": now, "exp": now + 3600, "jti": jti,
    });
    let key = match alg {
        jsonwebtoken::Algorithm::RS256 => jsonwebtoken::EncodingKey::from_rsa_pem(pem.as_bytes()),
        _ => jsonwebtoken::EncodingKey::from_ec_pem(pem.as_bytes()),
    }
    .unwrap();
    jsonwebtoken::encode(&jsonwebtoken::Header::new(alg), &claims, &key).unwrap()
}

/// The OAuth error of a refused token request: (status, `error`), after checking the body
/// has `error_description` and `reason` and the answer is not cached.
pub async fn oauth_error(response: Response) -> (u16, String) {
    let status = response.status().as_u16();
    assert_eq!(response.headers()["cache-control"], "no-store");
    assert_eq!(response.headers()["pragma"], "no-cache");
    let body: Value = response.json().await.unwrap();
    assert!(body["error_description"].is_string(), "{body}");
    assert_eq!(body["reason"], body["error_description"], "{body}");
    (status, body["error"].as_str().unwrap().to_owned())
}
