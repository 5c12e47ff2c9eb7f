//! Long lists a page at a time: the keys (newest first) and the audit log, each row once;
//! page links that name no row of the customer are refused in words.

use posture_domain::{KeyId, Scope, console::Actor, ports::ApiKeyRepository};
use reqwest::StatusCode;

use super::support::{Admin, admin, customer_with_console, html, page};
use crate::support::TestApp;

/// The `before` of the page's "Older" link, if it has one.
fn older_link(body: &str, list: &str) -> Option<String> {
    let start = body.find(&format!("href=\"{list}?before="))?;
    let rest = &body[start + list.len() + "href=\"?before=".len()..];
    Some(rest[..rest.find('"')?].to_owned())
}

/// The ids of the keys a keys page lists, in order.
fn listed_keys(body: &str) -> Vec<String> {
    body.match_indices("data-key-id=\"")
        .map(|(i, m)| body[i + m.len()..i + m.len() + 36].to_owned())
        .collect()
}

/// Walks a list from its first page by its "Older" links; the body of each page.
async fn walk(app: &TestApp, admin: &Admin, list: &str) -> Vec<String> {
    let mut pages = vec![];
    let mut next = Some(list.to_owned());
    while let Some(path) = next.take() {
        let body = html(page(app, &path, Some(admin)).await, StatusCode::OK).await;
        next = older_link(&body, list).map(|before| format!("{list}?before={before}"));
        pages.push(body);
        assert!(pages.len() <= 10, "the links go round in circles");
    }
    pages
}

#[tokio::test]
async fn the_keys_page_and_the_audit_log_are_read_a_page_at_a_time() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    // 53 keys (10 of them revoked, so that no more than 50 are active at once), issued
    // in order: 63 audit lines of keys; with the sign-in settings and Alice signing in, 65.
    let mut issued = vec![];
    for _ in 0..40 {
        issued.push(app.key(scope, &[Scope::ReadFindings]).await.0);
    }
    for id in &issued[..10] {
        app.store
            .revoke_key(None, *id, &Actor::Operator)
            .await
            .unwrap();
    }
    for _ in 0..13 {
        issued.push(app.key(scope, &[Scope::ReadFindings]).await.0);
    }
    let alice = admin(&app, scope, "Alice").await;

    let list = format!("/console/{customer}/keys");
    let pages = walk(&app, &alice, &list).await;
    let listed: Vec<Vec<String>> = pages.iter().map(|p| listed_keys(p)).collect();
    assert_eq!(
        listed.iter().map(Vec::len).collect::<Vec<_>>(),
        [50, 3],
        "50 keys a page"
    );
    let newest_first: Vec<String> = issued.iter().rev().map(KeyId::to_string).collect();
    assert_eq!(listed.concat(), newest_first, "each key once, newest first");
    assert!(
        !pages[0].contains("id=\"newest\""),
        "the first page is the newest"
    );
    assert!(pages[1].contains("id=\"newest\"") && pages[1].contains("Newest keys"));
    assert!(
        pages[1].contains("id=\"issue-key\""),
        "the issue form is on every page"
    );

    let audit = format!("/console/{customer}/audit");
    let pages = walk(&app, &alice, &audit).await;
    // Each row of the log is a <tr> of its table's body (one more: the header).
    let rows: Vec<usize> = pages
        .iter()
        .map(|p| p.matches("<tr>").count() - 1)
        .collect();
    assert_eq!(
        rows,
        [50, 15],
        "63 lines of keys, the sign-in settings, Alice signing in"
    );
    assert!(pages[0].contains("Signed in"), "the newest line first");
    assert!(pages[1].contains("Newest entries"));
    let revoked_lines: usize = pages.iter().map(|p| p.matches(">Revoked<").count()).sum();
    assert_eq!(revoked_lines, 10);
}

#[tokio::test]
async fn a_page_link_that_names_no_row_of_the_customer_is_refused_in_words() {
    let app = TestApp::start().await;
    let (scope, customer) = customer_with_console(&app, "Contoso").await;
    let (other, _) = customer_with_console(&app, "Fabrikam").await;
    let (fabrikam_key, _) = app.key(other, &[Scope::ReadFindings]).await;
    admin(&app, other, "Mallory").await;
    let fabrikam_audit =
        posture_domain::ports::ConsoleRepository::audit_log(&app.store, other, None, 1)
            .await
            .unwrap();
    let alice = admin(&app, scope, "Alice").await;
    for (list, before) in [
        ("keys", "not-an-id".to_owned()),
        ("keys", fabrikam_key.to_string()),
        ("keys", uuid::Uuid::now_v7().to_string()),
        ("keys", "%00".to_owned()),
        ("audit", "not-an-id".to_owned()),
        ("audit", fabrikam_audit[0].id.to_string()),
        ("audit", "x".repeat(5000)),
    ] {
        let path = format!("/console/{customer}/{list}?before={before}");
        let body = html(
            page(&app, &path, Some(&alice)).await,
            StatusCode::BAD_REQUEST,
        )
        .await;
        assert!(body.contains("This page link is out of date"), "{path}");
        assert!(!body.contains("Mallory") && !body.contains(&fabrikam_key.to_string()));
    }
}
