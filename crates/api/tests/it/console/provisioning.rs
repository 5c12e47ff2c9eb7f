//! Provisioning required for the console (docs/scim.md, "Requiring provisioning"): who may
//! sign in is what the identity provider provisioned over SCIM, admins are the members of a
//! named SCIM group, and a SCIM change that takes someone out ends their session before its
//! answer is sent. Signed in through the wiremock provider's real ID tokens; provisioned
//! through `/scim/v2` over HTTP.

use posture_domain::{
    CustomerScope, Scope,
    console::{AuditEvent, NewSession, Provisioning, SessionPolicy, SignedInUser},
    ports::ConsoleRepository,
};
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};

use super::{
    provider::{Provider, session_cookie, sign_in},
    support::{browser, configure_sso, customer, html, location},
};
use crate::{scim::Scim, support::TestApp};

/// A customer whose console requires provisioning: users ana (an admin), bob (active, not
/// in the admin group) and carl (deactivated, in the group) provisioned over SCIM.
pub(super) struct Provisioned {
    pub(super) scim: Scim,
    pub(super) provider: Provider,
    pub(super) customer: String,
    pub(super) ana: String,
    pub(super) bob: String,
    pub(super) admins: String,
}

impl Provisioned {
    pub(super) async fn start() -> Self {
        let app = TestApp::start().await;
        let provider = Provider::start().await;
        let (scope, customer) = customer(&app, "Contoso").await;
        configure_sso(&app, scope, &provider.issuer()).await;
        let (_, key) = app.key(scope, &[Scope::ProvisionScim]).await;
        let scim = Scim {
            app,
            customer: scope,
            key,
        };
        let ana = scim.create_user("Ana@Contoso.example").await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let bob = scim.create_user("bob@contoso.example").await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let carl = scim.create_user("carl@contoso.example").await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        scim.call(
            Method::PATCH,
            &format!("/Users/{carl}"),
            Some(json!({"schemas": [PATCH], "Operations": [{"op": "Replace", "value": {"active": "False"}}]})),
            StatusCode::OK,
        )
        .await;
        let group = scim
            .call(
                Method::POST,
                "/Groups",
                Some(json!({
                    "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
                    "displayName": "Posture Admins",
                    "members": [{"value": ana}, {"value": carl}],
                })),
                StatusCode::CREATED,
            )
            .await;
        require(&scim.app, scope).await;
        Self {
            provider,
            customer,
            ana,
            bob,
            admins: group["id"].as_str().unwrap().to_owned(),
            scim,
        }
    }

    /// A sign-in whose ID token carries this `email` (and the admin rule's group, which
    /// provisioning does not use).
    async fn sign_in(&self, email: Option<&str>) -> Response {
        let provider = &self.provider;
        sign_in(&self.scim.app, provider, &self.customer, &[], |nonce| {
            let now = chrono::Utc::now().timestamp();
            let mut claims = json!({
                "iss": provider.issuer(), "aud": "posture", "sub": format!("sub-{}", email.unwrap_or("none").replace('@', "-")),
                "nonce": nonce, "iat": now, "exp": now + 300, "name": "Someone",
                "groups": ["posture-admins"],
            });
            if let Some(email) = email {
                claims["email"] = json!(email);
                claims["email_verified"] = json!(true);
            }
            claims
        })
        .await
    }

    /// Signs ana in; her session cookie.
    pub(super) async fn ana_signs_in(&self) -> String {
        let response = self.sign_in(Some("ana@CONTOSO.example")).await;
        assert_eq!(
            location(&response),
            format!("/console/{}/keys", self.customer)
        );
        let cookie = session_cookie(&response).expect("a session");
        cookie.split(';').next().unwrap().to_owned()
    }

    /// The status of the keys page for this session cookie (303: sent to sign in).
    async fn keys_page(&self, cookie: &str) -> StatusCode {
        browser()
            .get(
                self.scim
                    .app
                    .url(&format!("/console/{}/keys", self.customer)),
            )
            .header("cookie", cookie)
            .send()
            .await
            .unwrap()
            .status()
    }

    /// A PATCH that succeeds (a user's answers 200, a group's 204).
    async fn patch(&self, path: &str, operations: Value) {
        let body = json!({"schemas": [PATCH], "Operations": operations});
        let response = self.scim.send(Method::PATCH, path, Some(body)).await;
        assert!(
            [StatusCode::OK, StatusCode::NO_CONTENT].contains(&response.status()),
            "PATCH {path}: {}",
            response.text().await.unwrap()
        );
    }

    async fn audit(&self) -> Vec<AuditEvent> {
        self.scim
            .app
            .store
            .audit_log(self.scim.customer, None, 100)
            .await
            .unwrap()
    }
}

const PATCH: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";

async fn require(app: &TestApp, scope: CustomerScope) {
    let provisioning = Provisioning {
        claim: "email".into(),
        admin_group: "posture admins".into(),
    };
    app.store
        .set_provisioning(scope, Some(&provisioning))
        .await
        .unwrap();
}

async fn refused(response: Response, title: &str) -> String {
    assert!(session_cookie(&response).is_none(), "no session");
    let body = html(response, StatusCode::FORBIDDEN).await;
    assert!(body.contains(title), "{body}");
    body
}

#[tokio::test]
async fn only_an_active_provisioned_member_of_the_admin_group_signs_in() {
    let p = Provisioned::start().await;
    p.ana_signs_in().await;
    let bob = refused(
        p.sign_in(Some("bob@contoso.example")).await,
        "You are not an admin of this organisation",
    )
    .await;
    assert!(bob.contains("posture admins"), "names the admin group");
    refused(
        p.sign_in(Some("carl@contoso.example")).await,
        "Your account is deactivated",
    )
    .await;
    let dora = refused(
        p.sign_in(Some("dora@contoso.example")).await,
        "You are not provisioned for this organisation",
    )
    .await;
    assert!(dora.contains("email"), "names the claim matched");
    refused(
        p.sign_in(None).await,
        "You are not provisioned for this organisation",
    )
    .await;
}

/// A look-alike of an admin's `userName` is another name: case folds only ASCII letters
/// (Unicode's lowercasing folds the KELVIN SIGN into `k`).
#[tokio::test]
async fn a_look_alike_of_an_admins_name_is_not_the_admin() {
    let p = Provisioned::start().await;
    let kate = p.scim.create_user("kate@contoso.example").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    p.patch(
        &format!("/Groups/{}", p.admins),
        json!([{"op": "add", "path": "members", "value": [{"value": kate}]}]),
    )
    .await;
    for look_alike in [
        "\u{212a}ate@contoso.example",  // KELVIN SIGN
        "\u{ff4b}ate@contoso.example",  // fullwidth k
        "kate@contoso.example\u{200b}", // zero-width space
    ] {
        refused(
            p.sign_in(Some(look_alike)).await,
            "You are not provisioned for this organisation",
        )
        .await;
    }
    // A provider cannot provision such a name either.
    let hidden = p
        .scim
        .send(
            Method::POST,
            "/Users",
            Some(
                json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
                        "userName": "kate@contoso.example\u{200b}"}),
            ),
        )
        .await;
    assert_eq!(hidden.status(), StatusCode::BAD_REQUEST);
    // The name itself, in any ASCII case, is kate.
    let response = p.sign_in(Some("KATE@contoso.example")).await;
    assert_eq!(location(&response), format!("/console/{}/keys", p.customer));
}

#[tokio::test]
async fn an_email_the_provider_has_not_verified_matches_nobody() {
    let p = Provisioned::start().await;
    let provider = &p.provider;
    for verified in [json!(false), Value::Null] {
        let response = sign_in(&p.scim.app, provider, &p.customer, &[], |nonce| {
            let now = chrono::Utc::now().timestamp();
            let mut claims = json!({
                "iss": provider.issuer(), "aud": "posture", "sub": "mallory", "nonce": nonce,
                "iat": now, "exp": now + 300, "email": "ana@contoso.example",
            });
            if !verified.is_null() {
                claims["email_verified"] = verified.clone();
            }
            claims
        })
        .await;
        refused(response, "You are not provisioned for this organisation").await;
    }
}

#[tokio::test]
async fn a_session_admitted_under_settings_that_changed_meanwhile_is_not_stored() {
    let p = Provisioned::start().await;
    let store = &p.scim.app.store;
    let before = store.console_setup(p.scim.customer).await.unwrap().unwrap();
    let user = SignedInUser {
        subject: "sub-ana".into(),
        display_name: "Ana".into(),
        claims: Default::default(),
    };
    let mut session = NewSession::start(
        p.scim.customer.customer_id(),
        &user,
        SessionPolicy::DEFAULT,
        chrono::Utc::now(),
    )
    .unwrap();
    session.admitted_under = Some(before.sso.updated_at);
    // Provisioning switched off while the sign-in was at the provider.
    store.set_provisioning(p.scim.customer, None).await.unwrap();
    let refused = store.create_session(&session, None).await;
    assert!(
        matches!(refused, Err(posture_domain::Error::PreconditionFailed(_))),
        "{refused:?}"
    );
    let sessions = store
        .live_sessions(p.scim.customer, SessionPolicy::DEFAULT, [0; 32])
        .await
        .unwrap();
    assert!(sessions.is_empty(), "nothing stored");
    let after = store.console_setup(p.scim.customer).await.unwrap().unwrap();
    session.admitted_under = Some(after.sso.updated_at);
    store.create_session(&session, None).await.unwrap();
    let sessions = store
        .live_sessions(p.scim.customer, SessionPolicy::DEFAULT, [0; 32])
        .await
        .unwrap();
    assert_eq!(sessions.len(), 1, "stored under the current settings");
}

#[tokio::test]
async fn deactivating_an_admin_ends_their_session_before_scim_answers_and_refuses_the_next_sign_in()
{
    let p = Provisioned::start().await;
    let cookie = p.ana_signs_in().await;
    assert_eq!(p.keys_page(&cookie).await, StatusCode::OK);
    // Entra ID's deactivation: a PATCH without path, `active` as a string.
    p.patch(
        &format!("/Users/{}", p.ana),
        json!([{"op": "Replace", "value": {"active": "False"}}]),
    )
    .await;
    assert_eq!(p.keys_page(&cookie).await, StatusCode::SEE_OTHER);
    refused(
        p.sign_in(Some("ana@contoso.example")).await,
        "Your account is deactivated",
    )
    .await;
    let ended = p
        .audit()
        .await
        .into_iter()
        .find(|e| e.action == "session.ended")
        .expect("a session.ended line");
    assert_eq!(ended.actor_kind, "key", "by the SCIM key");
    assert!(ended.key.is_none(), "no key was issued or revoked");
    assert!(
        ended
            .detail
            .as_deref()
            .unwrap_or_default()
            .contains("admin group"),
        "{:?}",
        ended.detail
    );

    // Reactivated, she signs in again.
    p.patch(
        &format!("/Users/{}", p.ana),
        json!([{"op": "replace", "path": "active", "value": true}]),
    )
    .await;
    let cookie = p.ana_signs_in().await;
    assert_eq!(p.keys_page(&cookie).await, StatusCode::OK);
}

#[tokio::test]
async fn leaving_the_admin_group_or_its_rename_or_deletion_ends_the_session() {
    let p = Provisioned::start().await;
    let group = format!("/Groups/{}", p.admins);
    let ana = p.ana.clone();

    let cookie = p.ana_signs_in().await;
    p.patch(
        &group,
        json!([{"op": "remove", "path": format!("members[value eq \"{ana}\"]")}]),
    )
    .await;
    assert_eq!(p.keys_page(&cookie).await, StatusCode::SEE_OTHER);
    refused(
        p.sign_in(Some("ana@contoso.example")).await,
        "You are not an admin of this organisation",
    )
    .await;

    // A change that keeps her in does not end her session.
    p.patch(
        &group,
        json!([{"op": "add", "path": "members", "value": [{"value": ana}]}]),
    )
    .await;
    let cookie = p.ana_signs_in().await;
    p.patch(
        &group,
        json!([{"op": "add", "path": "members", "value": [{"value": p.bob}]}]),
    )
    .await;
    p.patch(
        &format!("/Users/{}", p.bob),
        json!([{"op": "replace", "path": "displayName", "value": "Bob"}]),
    )
    .await;
    assert_eq!(p.keys_page(&cookie).await, StatusCode::OK);

    p.patch(
        &group,
        json!([{"op": "replace", "path": "displayName", "value": "Staff"}]),
    )
    .await;
    assert_eq!(p.keys_page(&cookie).await, StatusCode::SEE_OTHER);
    p.patch(
        &group,
        json!([{"op": "replace", "path": "displayName", "value": "POSTURE ADMINS"}]),
    )
    .await;
    let cookie = p.ana_signs_in().await;
    p.scim
        .call(Method::DELETE, &group, None, StatusCode::NO_CONTENT)
        .await;
    assert_eq!(p.keys_page(&cookie).await, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn deleting_a_user_ends_their_session_and_the_next_sign_in_is_not_provisioned() {
    let p = Provisioned::start().await;
    let cookie = p.ana_signs_in().await;
    // Another customer's SCIM writes leave this customer's sessions alone.
    let (other, _) = p.scim.app.customer("Fabrikam").await;
    let (_, other_key) = p.scim.app.key(other, &[Scope::ProvisionScim]).await;
    let theirs: Value = p
        .scim
        .send_as(
            &other_key,
            Method::POST,
            "/Users",
            Some(json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "ana@contoso.example"})),
        )
        .await
        .json()
        .await
        .unwrap();
    let deleted = p
        .scim
        .send_as(
            &other_key,
            Method::DELETE,
            &format!("/Users/{}", theirs["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    assert_eq!(p.keys_page(&cookie).await, StatusCode::OK);
    p.scim
        .call(
            Method::DELETE,
            &format!("/Users/{}", p.ana),
            None,
            StatusCode::NO_CONTENT,
        )
        .await;
    assert_eq!(p.keys_page(&cookie).await, StatusCode::SEE_OTHER);
    refused(
        p.sign_in(Some("ana@contoso.example")).await,
        "You are not provisioned for this organisation",
    )
    .await;
}

#[tokio::test]
async fn requiring_or_no_longer_requiring_provisioning_ends_every_session() {
    let p = Provisioned::start().await;
    let cookie = p.ana_signs_in().await;
    let off = p
        .scim
        .app
        .store
        .set_provisioning(p.scim.customer, None)
        .await
        .unwrap();
    assert_eq!(off.sessions_ended, 1);
    assert_eq!(off.sso.provisioning, None);
    assert_eq!(p.keys_page(&cookie).await, StatusCode::SEE_OTHER);
    // The admin rule again: bob's `groups` claim makes him an admin.
    let bob = p.sign_in(Some("bob@contoso.example")).await;
    assert!(session_cookie(&bob).is_some());
    require(&p.scim.app, p.scim.customer).await;
    let again = p
        .scim
        .app
        .store
        .set_provisioning(
            p.scim.customer,
            Some(&Provisioning {
                claim: "email".into(),
                admin_group: "posture admins".into(),
            }),
        )
        .await
        .unwrap();
    assert_eq!(again.sessions_ended, 0, "the same setting changes nothing");
    let line = p
        .audit()
        .await
        .into_iter()
        .find(|e| e.action == "sso.set")
        .unwrap();
    assert!(
        line.detail.unwrap().contains("provisioning required"),
        "the newest sso.set says what changed"
    );
}
