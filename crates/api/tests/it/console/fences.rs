//! The console's allow-lists (on the issue forms and each credential's page), last use with
//! its address, the inactivity rule's settings page and banner, and the audit page's new
//! lines: over HTTP, against the API the credentials then call.

use posture_domain::{Scope, ports::ApiKeyRepository};
use reqwest::StatusCode;

use super::support::{admin, customer_with_console, html, location, page, post_form, shown_key};
use crate::{support::TestApp, waits::wait_for};

#[tokio::test]
async fn an_admin_fences_a_key_at_issue_and_later_and_the_api_obeys_at_once() {
    let app = TestApp::start().await;
    let (scope, id) = customer_with_console(&app, "Contoso").await;
    let alice = admin(&app, scope, "Alice").await;
    let keys = format!("/console/{id}/keys");
    let form_page = html(page(&app, &keys, Some(&alice)).await, StatusCode::OK).await;
    let token = form_page
        .split("name=\"key_id\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    // A network that is none: the form again, saying why, nothing issued.
    let refused = post_form(
        &app,
        &keys,
        &alice,
        &[
            ("csrf", &alice.csrf),
            ("key_id", &token),
            ("name", "SIEM"),
            ("scope", "read:identities"),
            ("expires", "never"),
            ("allow_from", "10.0.0.0/33"),
        ],
    )
    .await;
    let body = html(refused, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert!(body.contains("Allowed networks:") && body.contains("10.0.0.0/33"));
    assert!(app.store.list_keys(scope).await.unwrap().is_empty());
    let issued = post_form(
        &app,
        &keys,
        &alice,
        &[
            ("csrf", &alice.csrf),
            ("key_id", &token),
            ("name", "SIEM"),
            ("scope", "read:identities"),
            ("expires", "never"),
            ("allow_from", "198.51.100.0/24\r\n2001:db8::/48"),
        ],
    )
    .await;
    let key = shown_key(&html(issued, StatusCode::OK).await);
    assert_eq!(
        app.get("/api/v1/identities", &key).await.status(),
        StatusCode::FORBIDDEN
    );
    let listed = html(page(&app, &keys, Some(&alice)).await, StatusCode::OK).await;
    assert!(listed.contains("198.51.100.0/24") && listed.contains("2001:db8::/48"));
    // Its page: the list as it stands; saved with loopback, the key works at once.
    let key_id = app.store.list_keys(scope).await.unwrap()[0].id;
    let fence = format!("/console/{id}/keys/{key_id}/allow-from");
    let shown = html(page(&app, &fence, Some(&alice)).await, StatusCode::OK).await;
    assert!(shown.contains("198.51.100.0/24\n2001:db8::/48"));
    let bad = post_form(
        &app,
        &fence,
        &alice,
        &[("csrf", &alice.csrf), ("allow_from", "example.com")],
    )
    .await;
    assert!(
        html(bad, StatusCode::UNPROCESSABLE_ENTITY)
            .await
            .contains("example.com")
    );
    let saved = post_form(
        &app,
        &fence,
        &alice,
        &[("csrf", &alice.csrf), ("allow_from", "127.0.0.1")],
    )
    .await;
    assert_eq!(location(&saved), keys);
    assert_eq!(
        app.get("/api/v1/identities", &key).await.status(),
        StatusCode::OK
    );
    // Without the form's token: refused, nothing changed.
    let forged = post_form(&app, &fence, &alice, &[("allow_from", "")]).await;
    assert_eq!(forged.status(), StatusCode::BAD_REQUEST);
    // Another customer's admin cannot see or change it.
    let (other_scope, other) = customer_with_console(&app, "Fabrikam").await;
    let mallory = admin(&app, other_scope, "Mallory").await;
    let foreign = format!("/console/{other}/keys/{key_id}/allow-from");
    assert_eq!(
        page(&app, &foreign, Some(&mallory)).await.status(),
        StatusCode::NOT_FOUND
    );
    let foreign_save = post_form(
        &app,
        &foreign,
        &mallory,
        &[("csrf", &mallory.csrf), ("allow_from", "")],
    )
    .await;
    assert_eq!(foreign_save.status(), StatusCode::NOT_FOUND);
    // The list shows where it was last used from; the audit page, the change, by whom and
    // from where.
    wait_for(|| async {
        let listed = html(page(&app, &keys, Some(&alice)).await, StatusCode::OK).await;
        listed.contains("from <code>127.0.0.1</code>").then_some(())
    })
    .await;
    let audit = html(
        page(&app, &format!("/console/{id}/audit"), Some(&alice)).await,
        StatusCode::OK,
    )
    .await;
    assert!(audit.contains("Allowed networks changed"));
    assert!(audit.contains("allowed from 127.0.0.1/32 (was 198.51.100.0/24, 2001:db8::/48)"));
    assert!(audit.contains("Refused: address not allowed"));
    assert!(
        audit.contains("<code>127.0.0.1</code>"),
        "the admin's address"
    );
}

#[tokio::test]
async fn an_admin_sets_the_inactivity_rule_and_the_pages_warn_of_what_lapses() {
    let app = TestApp::with_clock().await;
    let (scope, id) = customer_with_console(&app, "Contoso").await;
    let alice = admin(&app, scope, "Alice").await;
    let (_, _key) = app.key(scope, &[Scope::ReadIdentities]).await;
    let settings = format!("/console/{id}/settings");
    let shown = html(page(&app, &settings, Some(&alice)).await, StatusCode::OK).await;
    assert!(shown.contains("never stop working for inactivity"));
    for bad in ["3", "ninety", "4000"] {
        let refused = post_form(
            &app,
            &settings,
            &alice,
            &[("csrf", &alice.csrf), ("inactivity_days", bad)],
        )
        .await;
        let body = html(refused, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert!(body.contains("whole number from 7 to 3650"), "{bad}");
    }
    let saved = post_form(
        &app,
        &settings,
        &alice,
        &[("csrf", &alice.csrf), ("inactivity_days", "30")],
    )
    .await;
    let body = html(saved, StatusCode::OK).await;
    assert!(body.contains("Saved: credentials stop working after 30 days unused."));
    assert_eq!(
        posture_domain::ports::AuditRepository::inactivity(&app.store, scope)
            .await
            .unwrap(),
        Some(30)
    );
    // 25 days on, the never-used key lapses within a week: the keys page says so.
    app.clock()
        .advance(std::time::Duration::from_secs(25 * 86_400));
    // (Her session did not last 25 days: she signs in again.)
    let alice = admin(&app, scope, "Alice").await;
    let keys = html(
        page(&app, &format!("/console/{id}/keys"), Some(&alice)).await,
        StatusCode::OK,
    )
    .await;
    assert!(
        keys.contains("these stop working within a week unless used: test."),
        "{keys}"
    );
    let cleared = post_form(
        &app,
        &settings,
        &alice,
        &[("csrf", &alice.csrf), ("inactivity_days", "")],
    )
    .await;
    assert!(
        html(cleared, StatusCode::OK)
            .await
            .contains("never stop working")
    );
    let audit = html(
        page(&app, &format!("/console/{id}/audit"), Some(&alice)).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(audit.matches("Inactivity rule changed").count(), 2);
}
