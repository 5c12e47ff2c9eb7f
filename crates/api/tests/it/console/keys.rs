//! The API keys settings: issue (shown once), revoke, the audit log, customer isolation.

use posture_domain::{KeyId, Scope, console::Actor, ports::ApiKeyRepository};
use reqwest::StatusCode;

use super::support::{admin, customer_with_console, html, location, page, post_form, shown_key};
use crate::support::TestApp;

/// The one-time token posture's keys page gives `admin`'s session for a key of id `id`.
fn form_token(admin: &super::support::Admin, id: KeyId) -> String {
    crate::support::test_keyring()
        .form_key()
        .issue_form_token(&admin.csrf, id)
}

#[tokio::test]
async fn an_admin_issues_a_key_that_is_shown_once_and_works_on_the_api() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let alice = admin(&app, scope, "Alice Admin").await;
    let path = format!("/console/{customer}/keys");
    let form_id = form_token(&alice, KeyId::generate());
    let form = [
        ("csrf", alice.csrf.as_str()),
        ("key_id", form_id.as_str()),
        ("name", "SIEM connector"),
        ("scope", "read:findings"),
        ("expires", "30d"),
    ];
    let response = post_form(&app, &path, &alice, &form).await;
    assert_eq!(response.headers()["cache-control"], "no-store");
    let issued = html(response, StatusCode::OK).await;
    assert!(issued.contains("will not be shown again"));
    let key = shown_key(&issued);
    assert_eq!(key.len(), 43);

    let findings = app.get("/api/v1/findings", &key).await;
    assert_eq!(findings.status(), StatusCode::OK);
    let identities = app.get("/api/v1/identities", &key).await;
    assert_eq!(
        identities.status(),
        StatusCode::FORBIDDEN,
        "only read:findings"
    );

    let keys = app.store.list_keys(scope).await.unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].name, "SIEM connector");
    assert_eq!(keys[0].created_by, "Alice Admin");
    let lifetime = keys[0].expires_at.unwrap() - keys[0].created_at;
    assert!(
        (lifetime.num_seconds() - 30 * 86_400).abs() < 60,
        "{lifetime}"
    );

    for later in [path.clone(), format!("/console/{customer}/audit")] {
        let body = html(page(&app, &later, Some(&alice)).await, StatusCode::OK).await;
        assert!(!body.contains(&key), "{later} shows the key again");
        assert!(
            body.contains(&keys[0].prefix),
            "{later} names the key by prefix"
        );
    }

    // The same form sent again (a reload of the page that showed the key) issues nothing
    // and shows nothing secret: it says the key was issued.
    let again = html(post_form(&app, &path, &alice, &form).await, StatusCode::OK).await;
    assert!(again.contains("This form was already sent"), "{again}");
    assert!(!again.contains(&key));
    assert_eq!(app.store.list_keys(scope).await.unwrap().len(), 1);
    // A form posture did not render (no one-time id) is refused in words.
    let stale: Vec<_> = form
        .iter()
        .filter(|(k, _)| *k != "key_id")
        .copied()
        .collect();
    let body = html(
        post_form(&app, &path, &alice, &stale).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert!(body.contains("out of date"));
    assert_eq!(app.store.list_keys(scope).await.unwrap().len(), 1);
}

#[tokio::test]
async fn an_issue_forms_token_is_posture_s_for_the_session_never_an_id_the_admin_picks() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let alice = admin(&app, scope, "Alice").await;
    let bob = admin(&app, scope, "Bob").await;
    let (other, _) = customer_with_console(&app, "Fabrikam").await;
    let (foreign_key, _) = app.key(other, &[Scope::ReadFindings]).await;
    let path = format!("/console/{customer}/keys");
    // The page's form carries a token made for Alice's session.
    let keys_page = html(page(&app, &path, Some(&alice)).await, StatusCode::OK).await;
    let rendered = keys_page
        .split("name=\"key_id\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let id = rendered.split_once('.').unwrap().0.to_owned();
    // Ids an admin picks, another customer's key id (which once told "already used" from
    // "unused"), the page's id without its MAC, Bob's form under Alice's session: all are
    // answered alike, and nothing is issued.
    let refused = [
        "00000000-0000-0000-0000-000000000000".to_owned(),
        KeyId::generate().to_string(),
        foreign_key.to_string(),
        form_token(&bob, foreign_key),
        // Alice's own session sealing another customer's key id: only posture can seal.
        posture_domain::console::FormKey::derive(&[9; 32])
            .issue_form_token(&alice.csrf, foreign_key),
        id,
        form_token(&bob, KeyId::generate()),
    ];
    for token in &refused {
        let form = [
            ("csrf", alice.csrf.as_str()),
            ("key_id", token.as_str()),
            ("name", "picked"),
            ("scope", "read:findings"),
            ("expires", "30d"),
        ];
        let body = html(
            post_form(&app, &path, &alice, &form).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert!(body.contains("This form is out of date"), "{token}");
        assert!(!body.contains("already"), "{token}");
    }
    assert!(app.store.list_keys(scope).await.unwrap().is_empty());
    // The form as rendered issues the key under the id posture chose.
    let form = [
        ("csrf", alice.csrf.as_str()),
        ("key_id", rendered.as_str()),
        ("name", "rendered"),
        ("scope", "read:findings"),
        ("expires", "30d"),
    ];
    html(post_form(&app, &path, &alice, &form).await, StatusCode::OK).await;
    let keys = app.store.list_keys(scope).await.unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(
        Some(keys[0].id),
        crate::support::test_keyring()
            .form_key()
            .issue_form_key(&alice.csrf, &rendered)
    );
}

#[tokio::test]
async fn the_keys_page_lists_every_key_with_who_created_it() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    app.key(scope, &[Scope::ReadRoles, Scope::ProvisionScim])
        .await;
    let alice = admin(&app, scope, "Alice Admin").await;
    let body = html(
        page(&app, &format!("/console/{customer}/keys"), Some(&alice)).await,
        StatusCode::OK,
    )
    .await;
    for text in [
        "Contoso",
        "Alice Admin",
        "posture operator",
        "read:roles",
        "provision:scim",
        "Active",
    ] {
        assert!(body.contains(text), "the keys page lacks {text:?}");
    }
    for scope in Scope::ALL {
        assert!(
            body.contains(&format!("value=\"{}\"", scope.as_str())),
            "no {scope:?} checkbox"
        );
        assert!(
            body.contains(scope.grants()),
            "{scope:?} without what it grants"
        );
    }
    // Wide tables scroll inside their card; the page names its icon (no /favicon.ico 404).
    assert!(body.contains("class=\"table-scroll\""));
    let icon = page(&app, "/console/assets/favicon.svg", None).await;
    assert_eq!(icon.status(), StatusCode::OK);
    assert_eq!(icon.headers()["content-type"], "image/svg+xml");
    assert!(body.contains("/console/assets/favicon.svg"));
}

#[tokio::test]
async fn an_issue_form_without_a_name_or_scope_is_refused_in_words() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let alice = admin(&app, scope, "Alice").await;
    let path = format!("/console/{customer}/keys");
    let cases: [(&[(&str, &str)], &str); 3] = [
        (
            &[
                ("name", ""),
                ("scope", "read:findings"),
                ("expires", "never"),
            ],
            "Give the key a name",
        ),
        (&[("name", "x"), ("expires", "never")], "at least one scope"),
        (
            &[
                ("name", "x"),
                ("scope", "read:findings"),
                ("expires", "forever"),
            ],
            "when the key expires",
        ),
    ];
    let form_id = form_token(&alice, KeyId::generate());
    for (fields, reason) in cases {
        let mut form = vec![("csrf", alice.csrf.as_str()), ("key_id", form_id.as_str())];
        form.extend_from_slice(fields);
        let body = html(
            post_form(&app, &path, &alice, &form).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert!(body.contains(reason), "no {reason:?} in the page");
    }
    assert!(app.store.list_keys(scope).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_form_without_its_csrf_token_is_refused_and_changes_nothing() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let alice = admin(&app, scope, "Alice").await;
    let (key_id, key) = app.key(scope, &[Scope::ReadFindings]).await;
    let issue = format!("/console/{customer}/keys");
    let revoke = format!("/console/{customer}/keys/{key_id}/revoke");
    let fields = [
        ("name", "x"),
        ("scope", "read:findings"),
        ("expires", "never"),
    ];
    for csrf in [None, Some("wrong"), Some("")] {
        let mut form = fields.to_vec();
        form.extend(csrf.map(|c| ("csrf", c)));
        let body = html(
            post_form(&app, &issue, &alice, &form).await,
            StatusCode::BAD_REQUEST,
        )
        .await;
        assert!(body.contains("security token"));
        let form: Vec<(&str, &str)> = csrf.map(|c| ("csrf", c)).into_iter().collect();
        let response = post_form(&app, &revoke, &alice, &form).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    }
    assert_eq!(
        app.store.list_keys(scope).await.unwrap().len(),
        1,
        "no key issued"
    );
    assert_eq!(
        app.get("/api/v1/findings", &key).await.status(),
        StatusCode::OK,
        "not revoked"
    );
}

#[tokio::test]
async fn revoking_in_the_console_ends_the_key_on_the_api_at_once_and_is_audited() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let alice = admin(&app, scope, "Alice Admin").await;
    let (key_id, key) = app.key(scope, &[Scope::ReadFindings]).await;
    assert_eq!(
        app.get("/api/v1/findings", &key).await.status(),
        StatusCode::OK
    );

    let path = format!("/console/{customer}/keys/{key_id}/revoke");
    let confirm = html(page(&app, &path, Some(&alice)).await, StatusCode::OK).await;
    assert!(confirm.contains("cannot be undone"));
    let response = post_form(&app, &path, &alice, &[("csrf", &alice.csrf)]).await;
    assert_eq!(
        location(&response),
        format!("/console/{customer}/keys?revoked={key_id}")
    );
    assert_eq!(
        app.get("/api/v1/findings", &key).await.status(),
        StatusCode::UNAUTHORIZED
    );

    let audit = html(
        page(&app, &format!("/console/{customer}/audit"), Some(&alice)).await,
        StatusCode::OK,
    )
    .await;
    assert!(audit.contains("Revoked") && audit.contains("Issued"));
    assert!(audit.contains("Alice Admin") && audit.contains(&alice.subject));
    assert!(
        audit.contains("posture operator"),
        "the operator's issuance is recorded"
    );

    // Twice is harmless and recorded once.
    post_form(&app, &path, &alice, &[("csrf", &alice.csrf)]).await;
    let log = posture_domain::ports::ConsoleRepository::audit_log(&app.store, scope, None, 10)
        .await
        .unwrap();
    // (A key's first use from an address is a line of its own, written off the request path:
    // left out here.)
    let log: Vec<_> = log
        .into_iter()
        .filter(|e| e.action != "key.used_from_new_address")
        .collect();
    let actions: Vec<&str> = log.iter().map(|e| e.action.as_str()).collect();
    // (The console's sign-in settings, set by the operator first, and the admin's sign-in
    // are audited too.)
    assert_eq!(
        actions,
        ["key.revoked", "key.issued", "session.signed_in", "sso.set"]
    );
    assert_eq!(log[0].actor_kind, "admin");
    assert_eq!(log[1].actor_kind, "operator");
}

#[tokio::test]
async fn an_admin_cannot_see_or_revoke_another_customers_key() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let (other, _) = app.customer("Fabrikam").await;
    let alice = admin(&app, scope, "Alice").await;
    let (foreign_id, foreign_key) = app.key(other, &[Scope::ReadFindings]).await;
    let path = format!("/console/{customer}/keys/{foreign_id}/revoke");
    html(page(&app, &path, Some(&alice)).await, StatusCode::NOT_FOUND).await;
    let response = post_form(&app, &path, &alice, &[("csrf", &alice.csrf)]).await;
    html(response, StatusCode::NOT_FOUND).await;
    assert_eq!(
        app.get("/api/v1/findings", &foreign_key).await.status(),
        StatusCode::OK
    );
    let list = html(
        page(&app, &format!("/console/{customer}/keys"), Some(&alice)).await,
        StatusCode::OK,
    )
    .await;
    assert!(!list.contains(&foreign_id.to_string()));
}

#[tokio::test]
async fn operator_revocations_are_audited_as_the_operator() {
    let app = TestApp::start().await;
    let (scope, _) = customer_with_console(&app, "Contoso").await;
    let (key_id, _) = app.key(scope, &[Scope::ReadFindings]).await;
    let (_, revoked_now) = app
        .store
        .revoke_key(None, key_id, &Actor::Operator)
        .await
        .unwrap();
    assert!(revoked_now);
    let log = posture_domain::ports::ConsoleRepository::audit_log(&app.store, scope, None, 10)
        .await
        .unwrap();
    assert_eq!(log[0].action, "key.revoked");
    assert_eq!(log[0].actor_name, "posture operator");
    assert_eq!(log[0].key.as_ref().unwrap().id, key_id);
}

#[tokio::test]
async fn a_key_may_expire_on_a_date_the_admin_chooses() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let alice = admin(&app, scope, "Alice").await;
    let path = format!("/console/{customer}/keys");
    let form_id = form_token(&alice, KeyId::generate());
    let day = (chrono::Utc::now() + chrono::Duration::days(45)).date_naive();
    let day_text = day.format("%Y-%m-%d").to_string();
    let yesterday = (chrono::Utc::now() - chrono::Duration::days(1))
        .date_naive()
        .format("%Y-%m-%d")
        .to_string();
    let form = |on: &str| {
        [
            ("csrf", alice.csrf.clone()),
            ("key_id", form_id.clone()),
            ("name", "Quarterly audit".to_owned()),
            ("scope", "read:findings".to_owned()),
            ("expires", "date".to_owned()),
            ("expires_on", on.to_owned()),
        ]
    };
    for (on, reason) in [
        (yesterday.as_str(), "after today"),
        ("31/12/2027", "YYYY-MM-DD"),
        ("2999-01-01", "at most 5 years"),
    ] {
        let fields = form(on);
        let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let body = html(
            post_form(&app, &path, &alice, &fields).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert!(body.contains(reason), "{on}: no {reason:?}");
    }
    assert!(app.store.list_keys(scope).await.unwrap().is_empty());
    let fields = form(&day_text);
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    html(
        post_form(&app, &path, &alice, &fields).await,
        StatusCode::OK,
    )
    .await;
    let keys = app.store.list_keys(scope).await.unwrap();
    assert_eq!(
        keys[0].expires_at,
        Some(day.and_time(chrono::NaiveTime::MIN).and_utc()),
        "the key stops working at 00:00 UTC of the chosen day"
    );
}
