//! Sessions: required, bound to their customer, ended at sign-out, idle and absolute
//! timeouts; the pages' security headers.

use std::time::Duration;

use posture_domain::{
    console::{SessionPolicy, SessionToken},
    ports::ConsoleRepository,
};
use reqwest::{StatusCode, header};

use super::support::{Admin, admin, customer_with_console, html, location, page, post_form};
use crate::support::TestApp;

#[tokio::test]
async fn console_pages_need_a_session_of_their_customer() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let (other_scope, _) = customer_with_console(&app, "Fabrikam").await;
    let fabrikam_admin = admin(&app, other_scope, "Mallory").await;
    let forged = Admin {
        token: SessionToken::generate().unwrap().expose().to_owned(),
        csrf: String::new(),
        subject: String::new(),
    };
    for path in [
        "keys",
        "audit",
        "keys/00000000-0000-0000-0000-000000000000/revoke",
    ] {
        let path = format!("/console/{customer}/{path}");
        for who in [None, Some(&forged), Some(&fabrikam_admin)] {
            let response = page(&app, &path, who).await;
            assert_eq!(
                location(&response),
                format!("/console/{customer}/"),
                "{path}"
            );
        }
    }
    let alice = admin(&app, scope, "Alice").await;
    html(
        page(&app, &format!("/console/{customer}/keys"), Some(&alice)).await,
        StatusCode::OK,
    )
    .await;
}

#[tokio::test]
async fn console_pages_carry_a_strict_content_security_policy_and_deny_framing() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let alice = admin(&app, scope, "Alice").await;
    for (path, who) in [
        (format!("/console/{customer}/"), None),
        (format!("/console/{customer}/keys"), Some(&alice)),
        (format!("/console/{customer}/audit"), Some(&alice)),
        ("/console/".to_owned(), None),
        ("/console/nope".to_owned(), None),
    ] {
        let response = page(&app, &path, who).await;
        let headers = response.headers().clone();
        let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
        assert!(
            csp.contains("default-src 'none'") && !csp.contains("unsafe"),
            "{csp}"
        );
        assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(headers[header::CACHE_CONTROL], "no-store");
        assert_eq!(headers[header::REFERRER_POLICY], "no-referrer");
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        let body = response.text().await.unwrap();
        for script in body.match_indices("<script").map(|(i, _)| &body[i..]) {
            assert!(
                script.starts_with("<script src=\""),
                "inline script in {path}"
            );
        }
        assert!(
            !body.contains(" onclick=") && !body.contains(" onload="),
            "inline handler"
        );
    }
}

#[tokio::test]
async fn sign_out_ends_the_session_on_the_server_and_clears_the_cookie() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let alice = admin(&app, scope, "Alice").await;
    let path = format!("/console/{customer}/sign-out");
    let refused = post_form(&app, &path, &alice, &[]).await;
    assert_eq!(
        refused.status(),
        StatusCode::BAD_REQUEST,
        "sign-out needs the CSRF token"
    );
    let response = post_form(&app, &path, &alice, &[("csrf", &alice.csrf)]).await;
    let cookie = response.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        location(&response),
        format!("/console/{customer}/?signed-out=1")
    );
    assert!(
        cookie.starts_with("posture_session=;") && cookie.contains("Max-Age=0"),
        "{cookie}"
    );
    let again = page(&app, &format!("/console/{customer}/keys"), Some(&alice)).await;
    assert_eq!(
        location(&again),
        format!("/console/{customer}/"),
        "the old cookie is dead"
    );
    let signed_out = html(page(&app, &location(&response), None).await, StatusCode::OK).await;
    assert!(signed_out.contains("You have signed out"));

    // Both ends of the session are in the customer's audit log, by the admin; signing out
    // again (an ended session) adds nothing.
    post_form(&app, &path, &alice, &[("csrf", &alice.csrf)]).await;
    let log = posture_domain::ports::ConsoleRepository::audit_log(&app.store, scope, None, 10)
        .await
        .unwrap();
    let lines: Vec<(&str, &str, &str)> = log
        .iter()
        .filter(|e| e.action.starts_with("session."))
        .map(|e| {
            (
                e.action.as_str(),
                e.actor_kind.as_str(),
                e.actor_name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("session.signed_out", "admin", "Alice"),
            ("session.signed_in", "admin", "Alice"),
        ]
    );
    let audit_page = admin(&app, scope, "Bob").await;
    let body = html(
        page(
            &app,
            &format!("/console/{customer}/audit"),
            Some(&audit_page),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(body.contains("Signed in") && body.contains("Signed out"));
}

#[tokio::test]
async fn sessions_end_when_idle_and_at_their_absolute_expiry() {
    let app = TestApp::with_clock().await;
    let (scope, _) = customer_with_console(&app, "Contoso").await;
    let alice = admin(&app, scope, "Alice").await;
    let hash = SessionToken::presented(&alice.token).unwrap().hash();
    let short_idle = SessionPolicy {
        idle: Duration::from_secs(60),
        absolute: Duration::from_secs(3600),
    };
    let live = |hash, policy| {
        let store = app.store.clone();
        async move {
            store
                .live_session(scope, hash, policy)
                .await
                .unwrap()
                .is_some()
        }
    };
    assert!(live(hash, short_idle).await);
    app.clock().advance(Duration::from_secs(59));
    assert!(live(hash, short_idle).await, "use keeps a session alive");
    app.clock().advance(Duration::from_secs(59));
    assert!(live(hash, short_idle).await, "59 s after its last use");
    app.clock().advance(Duration::from_secs(61));
    assert!(!live(hash, short_idle).await, "idle for 61 s");

    let bob = admin(&app, scope, "Bob").await;
    let hash = SessionToken::presented(&bob.token).unwrap().hash();
    let in_use = SessionPolicy {
        idle: Duration::from_secs(3600),
        ..SessionPolicy::DEFAULT
    };
    // Used every 50 minutes, it lives to its absolute expiry (8 h after sign-in) and not a
    // moment longer.
    for _ in 0..9 {
        app.clock().advance(Duration::from_secs(50 * 60));
        assert!(
            live(hash, in_use).await,
            "in use, before its absolute expiry"
        );
    }
    app.clock().advance(Duration::from_secs(29 * 60));
    assert!(live(hash, in_use).await, "7 h 59 min after sign-in");
    app.clock().advance(Duration::from_secs(2 * 60));
    assert!(!live(hash, in_use).await, "past its absolute expiry");
}

/// The ids of the sessions a sessions page lists, in order.
fn listed_sessions(body: &str) -> Vec<String> {
    body.match_indices("data-session-id=\"")
        .map(|(i, m)| body[i + m.len()..i + m.len() + 36].to_owned())
        .collect()
}

#[tokio::test]
async fn an_admin_sees_who_is_signed_in_and_ends_other_sessions() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let (other, _) = customer_with_console(&app, "Fabrikam").await;
    let mallory = admin(&app, other, "Mallory").await;
    let alice = admin(&app, scope, "Alice").await;
    let bob = admin(&app, scope, "Bob").await;
    let carol = admin(&app, scope, "Carol").await;
    let sessions = format!("/console/{customer}/sessions");
    let signed_in_to = |who: &Admin, customer: String| {
        let path = format!("/console/{customer}/keys");
        let cookie = who.cookie();
        let app = &app;
        async move {
            let response = super::support::browser()
                .get(app.url(&path))
                .header(header::COOKIE, cookie)
                .send()
                .await
                .unwrap();
            response.status() == StatusCode::OK
        }
    };
    let signed_in = |who: &Admin| signed_in_to(who, customer.clone());

    let body = html(page(&app, &sessions, Some(&alice)).await, StatusCode::OK).await;
    let ids = listed_sessions(&body);
    assert_eq!(ids.len(), 3, "Alice, Bob and Carol; not Fabrikam's Mallory");
    for text in [
        "Alice",
        "sub-Bob",
        "Carol",
        "This session",
        "Sign out everywhere else (2)",
    ] {
        assert!(body.contains(text), "the sessions page lacks {text:?}");
    }
    assert!(!body.contains("Mallory"));
    assert!(
        !body.contains(&alice.token) && !body.contains(&bob.token),
        "a page never shows a session's token"
    );
    // Newest first: Carol, Bob, Alice; Alice's own row has no button.
    let row = |id: &str| {
        let start = body.find(&format!("data-session-id=\"{id}\"")).unwrap();
        body[start..start + body[start..].find("</tr>").unwrap()].to_owned()
    };
    let (bob_id, alice_id) = (&ids[1], &ids[2]);
    assert!(row(&ids[0]).contains("sub-Carol") && row(bob_id).contains("sub-Bob"));
    assert!(row(alice_id).contains("This session") && !row(alice_id).contains("<form"));

    // A form without its CSRF token ends nothing.
    let end_bob = format!("{sessions}/{bob_id}/end");
    let refused = post_form(&app, &end_bob, &alice, &[]).await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    assert!(signed_in(&bob).await);

    let ended = post_form(&app, &end_bob, &alice, &[("csrf", &alice.csrf)]).await;
    assert_eq!(location(&ended), format!("{sessions}?ended=1"));
    assert!(
        !signed_in(&bob).await,
        "Bob's browser is signed out at once"
    );
    assert!(signed_in(&carol).await && signed_in(&alice).await);
    let notice = html(
        page(&app, &location(&ended), Some(&alice)).await,
        StatusCode::OK,
    )
    .await;
    assert!(notice.contains("1 session was ended"));

    // Alice's own session is not ended this way (that is signing out), nor is another
    // customer's, whatever id the form names.
    let mallory_id = {
        let body = html(
            page(
                &app,
                &format!("/console/{}/sessions", other.customer_id()),
                Some(&mallory),
            )
            .await,
            StatusCode::OK,
        )
        .await;
        listed_sessions(&body).remove(0)
    };
    for id in [alice_id, &mallory_id] {
        let response = post_form(
            &app,
            &format!("{sessions}/{id}/end"),
            &alice,
            &[("csrf", &alice.csrf)],
        )
        .await;
        assert_eq!(location(&response), format!("{sessions}?ended=0"));
    }
    assert!(signed_in(&alice).await);
    assert!(signed_in_to(&mallory, other.customer_id().to_string()).await);
    let malformed = post_form(
        &app,
        &format!("{sessions}/not-a-session/end"),
        &alice,
        &[("csrf", &alice.csrf)],
    )
    .await;
    assert_eq!(malformed.status(), StatusCode::NOT_FOUND);

    // Everywhere else: Carol (and any other), never Alice.
    let everywhere = post_form(
        &app,
        &format!("{sessions}/end-others"),
        &alice,
        &[("csrf", &alice.csrf)],
    )
    .await;
    assert_eq!(location(&everywhere), format!("{sessions}?ended=1"));
    assert!(!signed_in(&carol).await && signed_in(&alice).await);
    let body = html(page(&app, &sessions, Some(&alice)).await, StatusCode::OK).await;
    assert_eq!(listed_sessions(&body), std::slice::from_ref(alice_id));
    assert!(!body.contains("Sign out everywhere else"));

    // Both are in the audit log, by Alice, naming whose session ended.
    let log = posture_domain::ports::ConsoleRepository::audit_log(&app.store, scope, None, 10)
        .await
        .unwrap();
    let ended: Vec<(&str, &str)> = log
        .iter()
        .filter(|e| e.action == "session.ended")
        .map(|e| (e.actor_name.as_str(), e.detail.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(
        ended,
        [
            ("Alice", "ended 1 other session"),
            ("Alice", "ended the session of Bob (sub-Bob)"),
        ]
    );
}
