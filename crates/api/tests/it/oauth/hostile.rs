//! The token endpoint and tokens under hostile input: each refused with its RFC 6749 code,
//! none a 5xx.

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use posture_domain::Scope;
use reqwest::header;

use super::{EC_PUBLIC, RSA_PUBLIC, basic, client, oauth_error, token, token_request};
use crate::support::TestApp;

const TYPE: &str = "urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer";

#[tokio::test]
async fn malformed_requests_get_their_rfc_6749_codes() {
    let app = TestApp::start().await;
    let (scope, _) = app.customer("Contoso").await;
    let client = client(&app, scope, &[Scope::ReadFindings], None).await;
    let secret = client.secret.as_deref().unwrap();
    let auth = basic(&client.client_id, secret);
    let cases: Vec<(String, Option<&str>, u16, &str)> = vec![
        ("".into(), Some(&auth), 400, "invalid_request"),
        (
            "grant_type=password".into(),
            Some(&auth),
            400,
            "unsupported_grant_type",
        ),
        (
            "grant_type=authorization_code&code=x".into(),
            Some(&auth),
            400,
            "unsupported_grant_type",
        ),
        (
            "grant_type=client_credentials&grant_type=client_credentials".into(),
            Some(&auth),
            400,
            "invalid_request",
        ),
        // Two ways of authenticating at once.
        (
            format!(
                "grant_type=client_credentials&client_id={}&client_secret={secret}",
                client.client_id
            ),
            Some(&auth),
            400,
            "invalid_request",
        ),
        // No authentication, or an id alone.
        (
            "grant_type=client_credentials".into(),
            None,
            400,
            "invalid_client",
        ),
        (
            format!(
                "grant_type=client_credentials&client_id={}",
                client.client_id
            ),
            None,
            400,
            "invalid_client",
        ),
        // A Bearer header is not client authentication.
        (
            "grant_type=client_credentials".into(),
            Some("Bearer svc_x"),
            401,
            "invalid_client",
        ),
        (
            "grant_type=client_credentials".into(),
            Some("Basic !!!"),
            401,
            "invalid_client",
        ),
        (
            format!(
                "grant_type=client_credentials&client_assertion_type=urn:x&client_assertion=a.b.c&client_id={}",
                client.client_id
            ),
            None,
            400,
            "invalid_request",
        ),
    ];
    for (form, authorization, status, error) in cases {
        let response = token_request(&app, &form, authorization).await;
        let got = oauth_error(response).await;
        assert_eq!(
            got,
            (status, error.to_owned()),
            "{form} with {authorization:?}"
        );
    }
    // Not a form.
    let response = app
        .client
        .post(app.url("/oauth/token"))
        .header(header::AUTHORIZATION, &auth)
        .json(&serde_json::json!({"grant_type": "client_credentials"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        oauth_error(response).await,
        (400, "invalid_request".to_owned())
    );
    // The wrong method: 405 with Allow.
    let response = app
        .client
        .get(app.url("/oauth/token"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    assert_eq!(response.headers()["allow"], "POST");
}

#[tokio::test]
async fn a_wrong_secret_is_401_with_a_challenge_and_another_customers_client_is_unknown() {
    let app = TestApp::start().await;
    let (contoso, _) = app.customer("Contoso").await;
    let (fabrikam, _) = app.customer("Fabrikam").await;
    let ours = client(&app, contoso, &[Scope::ReadFindings], None).await;
    let theirs = client(&app, fabrikam, &[Scope::ReadFindings], None).await;
    // Our id with their secret, a made-up secret, a made-up id.
    let made_up = posture_domain::oauth::ClientSecretValue::generate().unwrap();
    for (id, secret) in [
        (ours.client_id.as_str(), theirs.secret.as_deref().unwrap()),
        (ours.client_id.as_str(), made_up.expose()),
        (
            "pci_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            ours.secret.as_deref().unwrap(),
        ),
        ("' OR 1=1 --", ours.secret.as_deref().unwrap()),
    ] {
        let response = token_request(
            &app,
            "grant_type=client_credentials",
            Some(&basic(id, secret)),
        )
        .await;
        let challenge = response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            challenge.starts_with("Basic realm=\"posture\""),
            "{challenge}"
        );
        assert_eq!(
            oauth_error(response).await,
            (401, "invalid_client".to_owned())
        );
    }
}

#[tokio::test]
async fn failed_client_authentications_spend_the_addresss_budget() {
    let app = TestApp::with_limiter(
        || {
            std::sync::Arc::new(posture_rate_limit::InProcessRateLimiter::new(
                posture_domain::rate_limit::RatePolicy {
                    limit: 3,
                    window_secs: 900,
                },
                posture_domain::clock::system(),
            ))
        },
        posture_http::TrustedProxies::default(),
    )
    .await;
    let (scope, _) = app.customer("Contoso").await;
    let client = client(&app, scope, &[Scope::ReadFindings], None).await;
    let wrong = posture_domain::oauth::ClientSecretValue::generate().unwrap();
    let guess = basic(&client.client_id, wrong.expose());
    for _ in 0..3 {
        let response = token_request(&app, "grant_type=client_credentials", Some(&guess)).await;
        assert_eq!(response.status(), 401);
    }
    // The address is spent: the next guess is not even checked.
    let response = token_request(&app, "grant_type=client_credentials", Some(&guess)).await;
    assert_eq!(response.status(), 429);
    assert!(response.headers().contains_key("retry-after"));
}

/// A JWT with this header and these claims, and a signature of junk.
fn forged(header: serde_json::Value, claims: &serde_json::Value) -> String {
    let part = |v: &serde_json::Value| URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.{}",
        part(&header),
        part(claims),
        URL_SAFE_NO_PAD.encode(b"junk")
    )
}

#[tokio::test]
async fn forged_assertions_are_refused() {
    let app = TestApp::start().await;
    let (scope, _) = app.customer("Contoso").await;
    let rsa = client(&app, scope, &[Scope::ReadFindings], Some(RSA_PUBLIC)).await;
    let ec = client(&app, scope, &[Scope::ReadFindings], Some(EC_PUBLIC)).await;
    let now = chrono::Utc::now().timestamp();
    let claims = |id: &str| {
        serde_json::json!({"iss": id, "sub": id, "aud": app.url("/oauth/token"),
                           "exp": now + 300, "jti": uuid::Uuid::new_v4().to_string()})
    };
    // HS256 keyed with the client's own public key (algorithm confusion).
    let confused = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims(&rsa.client_id),
        &EncodingKey::from_secret(RSA_PUBLIC.as_bytes()),
    )
    .unwrap();
    // A key of the attacker's, named by `jku`, `x5u` and `kid`.
    let attacker_key = ring::signature::EcdsaKeyPair::generate_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        &ring::rand::SystemRandom::new(),
    )
    .unwrap();
    let mut injected = Header::new(Algorithm::ES256);
    injected.jku = Some("https://attacker.example/jwks.json".into());
    injected.x5u = Some("https://attacker.example/cert.pem".into());
    injected.kid = Some("../../../../dev/null".into());
    let injected = jsonwebtoken::encode(
        &injected,
        &claims(&ec.client_id),
        &EncodingKey::from_ec_der(attacker_key.as_ref()),
    )
    .unwrap();
    let assertions = [
        forged(serde_json::json!({"alg": "none"}), &claims(&ec.client_id)),
        forged(
            serde_json::json!({"alg": "none", "typ": "JWT"}),
            &claims(&rsa.client_id),
        ),
        confused,
        injected,
        forged(serde_json::json!({"alg": "ES256"}), &claims(&ec.client_id)),
        "not-a-jwt".to_owned(),
        "a".repeat(20_000),
    ];
    for assertion in assertions {
        let form = format!(
            "grant_type=client_credentials&client_assertion_type={TYPE}&client_assertion={assertion}"
        );
        let response = token_request(&app, &form, None).await;
        let (status, error) = oauth_error(response).await;
        assert!(status == 400, "{status} for {assertion:.40}");
        assert!(
            error == "invalid_client" || error == "invalid_request",
            "{error} for {assertion:.40}"
        );
    }
}

#[tokio::test]
async fn a_forged_or_altered_token_is_refused_without_a_lookup() {
    let app = TestApp::start().await;
    let (scope, _) = app.customer("Contoso").await;
    let client = client(&app, scope, &[Scope::ReadFindings], None).await;
    let token = token(&app, &client, "").await;
    let mut altered: Vec<char> = token.chars().collect();
    // The scope byte: a client cannot widen its token.
    let i = 40;
    altered[i] = if altered[i] == 'a' { 'b' } else { 'a' };
    let altered: String = altered.into_iter().collect();
    for presented in [
        altered.as_str(),
        "pat_",
        &token[..token.len() - 1],
        "pat_aaaa",
    ] {
        assert_eq!(
            app.get("/api/v1/findings", presented).await.status(),
            401,
            "{presented}"
        );
    }
    // A token made with another server's key.
    let other = posture_domain::oauth::TokenKeys::derive(&[9; 32], &[]);
    let made = other.issue(&posture_domain::oauth::TokenClaims {
        client: client.id,
        scopes: posture_domain::ScopeSet::all(),
        expires_at: chrono::Utc::now() + chrono::Duration::minutes(5),
    });
    assert_eq!(
        app.get("/api/v1/findings", made.expose()).await.status(),
        401
    );
}
