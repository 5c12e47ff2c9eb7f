//! The whole sign-in against a provider served by wiremock that signs real ID tokens
//! (ES256 with ring): the session cookie's flags, the admin rule's 403, ID tokens of another
//! issuer, audience or nonce refused, a new session at every sign-in.

use base64::Engine as _;
use reqwest::{Response, StatusCode, header};
use ring::{
    rand::SystemRandom,
    signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _},
};
use serde_json::{Value, json};
use wiremock::{
    Mock, MockServer, ResponseTemplate,
    matchers::{body_string_contains, header_exists, method, path},
};

use super::support::{browser, configure_sso, customer, html, location};
use crate::support::TestApp;

/// An OpenID provider with one ES256 signing key.
pub struct Provider {
    server: MockServer,
    key: EcdsaKeyPair,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Provider {
    pub async fn start() -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let point = key.public_key().as_ref();
        let server = MockServer::start().await;
        let issuer = server.uri();
        Mock::given(method("GET"))
            .and(path("/.well-known/openid-configuration"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "issuer": issuer,
                "authorization_endpoint": format!("{issuer}/authorize"),
                "token_endpoint": format!("{issuer}/token"),
                "jwks_uri": format!("{issuer}/jwks"),
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["ES256"],
            })))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/jwks"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"keys": [{
                "kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256", "use": "sig",
                "x": b64(&point[1..33]), "y": b64(&point[33..65]),
            }]})))
            .mount(&server)
            .await;
        Self { server, key }
    }

    pub fn issuer(&self) -> String {
        self.server.uri()
    }

    /// A signed ID token with these claims.
    fn id_token(&self, claims: &Value) -> String {
        let header = b64(br#"{"alg":"ES256","typ":"JWT","kid":"k1"}"#);
        let payload = b64(claims.to_string().as_bytes());
        let input = format!("{header}.{payload}");
        let signature = self
            .key
            .sign(&SystemRandom::new(), input.as_bytes())
            .unwrap();
        format!("{input}.{}", b64(signature.as_ref()))
    }

    /// The token endpoint answers (once) with an ID token of these claims, if the request
    /// carries the PKCE verifier and the client's credentials.
    async fn will_issue(&self, claims: &Value) {
        self.will_issue_token(self.id_token(claims)).await;
    }

    /// The token endpoint answers (once) with this ID token, whatever it is.
    async fn will_issue_token(&self, id_token: String) {
        Mock::given(method("POST"))
            .and(path("/token"))
            .and(body_string_contains("grant_type=authorization_code"))
            .and(body_string_contains("code_verifier="))
            .and(header_exists("authorization"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "access_token": "at", "token_type": "Bearer", "expires_in": 300,
                "id_token": id_token,
            })))
            .up_to_n_times(1)
            .mount(&self.server)
            .await;
    }
}

/// Claims of a user of `provider`, for the sign-in whose nonce is `nonce`.
pub(super) fn claims(provider: &Provider, subject: &str, groups: &[&str], nonce: &str) -> Value {
    let now = chrono::Utc::now().timestamp();
    json!({
        "iss": provider.issuer(), "aud": "posture", "sub": subject, "nonce": nonce,
        "iat": now, "exp": now + 300, "name": format!("User {subject}"), "groups": groups,
    })
}

/// A sign-in through the redirect and the callback; `claims` turns the nonce into the ID
/// token's claims. Returns the callback's response.
pub(super) async fn sign_in(
    app: &TestApp,
    provider: &Provider,
    customer: &str,
    extra: &[(&str, &str)],
    claims: impl Fn(&str) -> Value,
) -> Response {
    let mut start = browser().get(app.url(&format!("/console/{customer}/sign-in")));
    for (name, value) in extra {
        start = start.header(*name, *value);
    }
    let started = start.send().await.unwrap();
    let to = url::Url::parse(&location(&started)).unwrap();
    let query: std::collections::HashMap<_, _> = to.query_pairs().into_owned().collect();
    let binding = started.headers()[header::SET_COOKIE].to_str().unwrap();
    let mut cookies = vec![binding.split(';').next().unwrap().to_owned()];
    cookies.extend(
        extra
            .iter()
            .filter(|(name, _)| *name == "cookie")
            .map(|(_, value)| (*value).to_owned()),
    );
    provider.will_issue(&claims(&query["nonce"])).await;
    let mut callback = browser()
        .get(app.url(&format!(
            "/console/{customer}/callback?code=the-code&state={}",
            query["state"]
        )))
        .header(header::COOKIE, cookies.join("; "));
    for (name, value) in extra.iter().filter(|(name, _)| *name != "cookie") {
        callback = callback.header(*name, *value);
    }
    callback.send().await.unwrap()
}

pub(super) fn session_cookie(response: &Response) -> Option<String> {
    response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("posture_session=") && !c.contains("Max-Age=0"))
}

pub(super) async fn console_with_provider(app: &TestApp) -> (Provider, String) {
    let provider = Provider::start().await;
    let (scope, id) = customer(app, "Contoso").await;
    configure_sso(app, scope, &provider.issuer()).await;
    (provider, id)
}

#[tokio::test]
async fn an_admin_signs_in_and_gets_a_session_cookie_with_every_flag() {
    let app = TestApp::start().await;
    let (provider, customer) = console_with_provider(&app).await;
    let response = sign_in(&app, &provider, &customer, &[], |nonce| {
        claims(&provider, "alice", &["staff", "posture-admins"], nonce)
    })
    .await;
    assert_eq!(location(&response), format!("/console/{customer}/keys"));
    let cookie = session_cookie(&response).expect("a session cookie");
    for flag in [
        "HttpOnly",
        "SameSite=Lax",
        &format!("Path=/console/{customer}/"),
        "Max-Age=28800",
    ] {
        assert!(cookie.contains(flag), "{cookie} lacks {flag}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP");
    let token = cookie.split(';').next().unwrap().to_owned();
    let keys = browser()
        .get(app.url(&format!("/console/{customer}/keys")))
        .header(header::COOKIE, &token)
        .send()
        .await
        .unwrap();
    assert!(html(keys, StatusCode::OK).await.contains("User alice"));
}

#[tokio::test]
async fn behind_a_trusted_tls_proxy_the_session_cookie_is_secure_and_prefixed() {
    let app = TestApp::behind_trusted_proxy().await;
    let (provider, customer) = console_with_provider(&app).await;
    let over_tls = sign_in(
        &app,
        &provider,
        &customer,
        &[("x-forwarded-proto", "https")],
        |n| claims(&provider, "alice", &["posture-admins"], n),
    )
    .await;
    let cookie = over_tls
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("__Secure-posture_session=") && !c.contains("Max-Age=0"))
        .expect("a __Secure- session cookie");
    assert!(
        cookie.contains("Secure") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
}

#[tokio::test]
async fn id_tokens_of_another_issuer_audience_or_nonce_are_refused() {
    let app = TestApp::start().await;
    let (provider, customer) = console_with_provider(&app).await;
    let admin = |nonce: &str| claims(&provider, "alice", &["posture-admins"], nonce);
    let with = |mut claims: Value, name: &str, value: Value| {
        claims[name] = value;
        claims
    };
    type Forge<'a> = Box<dyn Fn(&str) -> Value + 'a>;
    let forged: [Forge<'_>; 4] = [
        Box::new(|n| with(admin(n), "iss", json!("https://idp.fabrikam.example"))),
        Box::new(|n| with(admin(n), "aud", json!("another-client"))),
        Box::new(|_| admin("a-nonce-of-another-sign-in")),
        Box::new(|n| with(admin(n), "exp", json!(1_000_000_000))),
    ];
    for claims in forged {
        let response = sign_in(&app, &provider, &customer, &[], claims).await;
        assert!(session_cookie(&response).is_none());
        let body = html(response, StatusCode::BAD_REQUEST).await;
        assert!(body.contains("could not be verified"));
    }
}

#[tokio::test]
async fn every_sign_in_starts_a_new_session_and_ends_the_one_it_replaces() {
    let app = TestApp::start().await;
    let (provider, customer) = console_with_provider(&app).await;
    let admin = |nonce: &str| claims(&provider, "alice", &["posture-admins"], nonce);
    let first = session_cookie(&sign_in(&app, &provider, &customer, &[], admin).await).unwrap();
    let first = first.split(';').next().unwrap().to_owned();
    let second = sign_in(&app, &provider, &customer, &[("cookie", &first)], admin).await;
    let second = session_cookie(&second).unwrap();
    let second = second.split(';').next().unwrap().to_owned();
    assert_ne!(first, second);
    let keys = format!("/console/{customer}/keys");
    let old = browser()
        .get(app.url(&keys))
        .header(header::COOKIE, &first)
        .send()
        .await
        .unwrap();
    assert_eq!(
        location(&old),
        format!("/console/{customer}/"),
        "the replaced session ended"
    );
    let new = browser()
        .get(app.url(&keys))
        .header(header::COOKIE, &second)
        .send()
        .await
        .unwrap();
    assert_eq!(new.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_providers_claims_are_cleaned_and_a_broken_subject_is_refused() {
    let app = TestApp::start().await;
    let (provider, customer) = console_with_provider(&app).await;
    let admin = |subject: &str, name: Value, nonce: &str| {
        let mut claims = claims(&provider, subject, &["posture-admins"], nonce);
        claims["name"] = name;
        claims
    };
    // An empty name falls back to the subject; a NUL or a line break in one is cleaned.
    for (name, shown) in [
        (json!(""), "alice"),
        (json!("   "), "alice"),
        (json!("Alice\u{0}Admin"), "Alice Admin"),
        (json!("Alice\nINFO key revoked"), "Alice INFO key revoked"),
    ] {
        let response = sign_in(&app, &provider, &customer, &[], |n| {
            admin("alice", name.clone(), n)
        })
        .await;
        let cookie = session_cookie(&response).expect("signed in");
        let token = cookie.split(';').next().unwrap().to_owned();
        let keys = browser()
            .get(app.url(&format!("/console/{customer}/keys")))
            .header(header::COOKIE, &token)
            .send()
            .await
            .unwrap();
        let page = html(keys, StatusCode::OK).await;
        assert!(page.contains(shown), "{name}: {shown} not on the page");
        // The admin can issue a key: its created-by (the display name) is storable.
        let csrf = page
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap()
            .to_owned();
        let signed = super::support::Admin {
            token: token.trim_start_matches("posture_session=").to_owned(),
            csrf: csrf.clone(),
            subject: "alice".into(),
        };
        let issued = super::support::post_form(
            &app,
            &format!("/console/{customer}/keys"),
            &signed,
            &[
                ("csrf", &csrf),
                (
                    "key_id",
                    &crate::support::test_keyring()
                        .form_key()
                        .issue_form_token(&csrf, posture_domain::KeyId::generate()),
                ),
                ("name", "k"),
                ("scope", "read:findings"),
                ("expires", "never"),
            ],
        )
        .await;
        assert_ne!(issued.status(), StatusCode::INTERNAL_SERVER_ERROR, "{name}");
    }
    // A subject that is not an identifier is refused (it could be neither stored nor logged).
    let response = sign_in(&app, &provider, &customer, &[], |n| {
        admin("alice\nroot", json!("Alice"), n)
    })
    .await;
    assert!(session_cookie(&response).is_none());
    assert!(
        html(response, StatusCode::BAD_REQUEST)
            .await
            .contains("could not be verified")
    );
}

#[tokio::test]
async fn a_discovery_document_cannot_send_posture_where_the_operator_did_not_allow() {
    use posture_domain::{
        console::{AdminRule, SsoConfig},
        egress::EgressPolicy,
        ports::{SignInError, SignInProvider as _},
    };
    // A provider on 127.0.0.1 whose discovery document names keys on 127.0.0.2, where an
    // internal service listens: the operator allowed 127.0.0.1 only.
    let probe = MockServer::builder()
        .listener(std::net::TcpListener::bind("127.0.0.2:0").unwrap())
        .start()
        .await;
    let provider = MockServer::start().await;
    let issuer = provider.uri();
    Mock::given(method("GET"))
        .and(path("/.well-known/openid-configuration"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{}/token", probe.uri()),
            "jwks_uri": format!("{}/internal", probe.uri()),
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        })))
        .mount(&provider)
        .await;
    let relying_party = posture_oidc::OidcSignIn::new(EgressPolicy {
        allow_private: false,
        allowed_networks: vec!["127.0.0.1/32".parse().unwrap()],
    })
    .unwrap();
    let sso = SsoConfig {
        customer_id: posture_domain::CustomerId::from_uuid(uuid::Uuid::now_v7()),
        issuer: issuer.clone(),
        client_id: "posture".into(),
        display_name: None,
        provisioning: None,
        admins: AdminRule {
            claim: Some("groups".into()),
            values: vec!["admins".into()],
            subjects: vec![],
        },
        updated_at: chrono::Utc::now(),
    };
    let refused = relying_party
        .start_sign_in(&sso, "http://127.0.0.1/console/x/callback")
        .await
        .unwrap_err();
    assert!(matches!(refused, SignInError::Provider(_)), "{refused:?}");
    assert!(
        probe.received_requests().await.unwrap().is_empty(),
        "nothing reached the address the operator did not allow"
    );
    // Nor does a provider the operator did not list at all: loopback is refused outright.
    let public_only = posture_oidc::OidcSignIn::new(EgressPolicy::public_only()).unwrap();
    assert!(
        public_only
            .start_sign_in(&sso, "http://127.0.0.1/cb")
            .await
            .is_err()
    );
    assert!(provider.received_requests().await.unwrap().len() <= 1);
}

#[tokio::test]
async fn unsigned_and_symmetrically_signed_id_tokens_are_refused() {
    use hmac::{KeyInit as _, Mac as _};
    let app = TestApp::start().await;
    let (provider, customer) = console_with_provider(&app).await;
    // The provider signs with ES256 only: `alg: none`, and HS256 keyed with the client
    // secret (which the attacker may know), must not pass.
    let forge = |alg: &str, claims: &Value| {
        let header = b64(format!(r#"{{"alg":"{alg}","typ":"JWT"}}"#).as_bytes());
        let input = format!("{header}.{}", b64(claims.to_string().as_bytes()));
        let signature = match alg {
            "HS256" => {
                let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"client-secret").unwrap();
                mac.update(input.as_bytes());
                b64(&mac.finalize().into_bytes())
            }
            _ => String::new(),
        };
        format!("{input}.{signature}")
    };
    for alg in ["none", "HS256"] {
        let start = browser()
            .get(app.url(&format!("/console/{customer}/sign-in")))
            .send()
            .await
            .unwrap();
        let to = url::Url::parse(&location(&start)).unwrap();
        let query: std::collections::HashMap<_, _> = to.query_pairs().into_owned().collect();
        let binding = start.headers()[header::SET_COOKIE].to_str().unwrap();
        let binding = binding.split(';').next().unwrap().to_owned();
        let claims = claims(&provider, "mallory", &["posture-admins"], &query["nonce"]);
        provider.will_issue_token(forge(alg, &claims)).await;
        let callback = browser()
            .get(app.url(&format!(
                "/console/{customer}/callback?code=the-code&state={}",
                query["state"]
            )))
            .header(header::COOKIE, binding)
            .send()
            .await
            .unwrap();
        assert!(session_cookie(&callback).is_none(), "{alg}");
        let body = html(callback, StatusCode::BAD_REQUEST).await;
        assert!(body.contains("could not be verified"), "{alg}");
    }
}

#[tokio::test]
async fn a_display_name_from_the_provider_is_escaped_on_every_page() {
    let app = TestApp::start().await;
    let (provider, customer) = console_with_provider(&app).await;
    let response = sign_in(&app, &provider, &customer, &[], |n| {
        let mut claims = claims(&provider, "alice", &["posture-admins"], n);
        claims["name"] = json!("<script>alert(1)</script>");
        claims
    })
    .await;
    let cookie = session_cookie(&response).unwrap();
    let token = cookie.split(';').next().unwrap().to_owned();
    let keys = browser()
        .get(app.url(&format!("/console/{customer}/keys")))
        .header(header::COOKIE, &token)
        .send()
        .await
        .unwrap();
    let page = html(keys, StatusCode::OK).await;
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "escaped"
    );
    assert!(!page.contains("<script>alert(1)"), "never as markup");
}
