//! Cursor pagination on every list: `after` walks the same rows as `offset`, in the same
//! order, without gaps or repeats; the cursor is authenticated and bound to its request.

use posture_domain::{
    CustomerScope, Refusal,
    cursor::{Cursor, CursorContext, CursorKey},
    page::{KeyPart, SortKey},
};
use posture_test_support::fixtures::{finding, identity, recommendation, tenant, upr_score};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestApp, assert_refused};

/// Every list, with the field that identifies its rows.
const LISTS: [(&str, &str); 6] = [
    ("/api/v1/findings", "/id"),
    ("/api/v1/identities", "/id"),
    ("/api/v1/roles", "/id"),
    ("/api/v1/tenants", "/cloudTenantId"),
    ("/api/v1/upr/principals", "/identity/id"),
    ("/api/v1/webhooks", "/id"),
];

/// A customer with more than a page of everything, with ties in every order (same severity
/// and detection time, same score, same creation second).
async fn dataset(app: &TestApp) -> (CustomerScope, String) {
    let (customer, t1) = app.customer("A").await;
    let mut records = Vec::new();
    for t in 0..6 {
        records.push(tenant(&uuid::Uuid::new_v4().to_string(), &format!("T{t}")));
    }
    let today = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    for i in 0..23 {
        let id = format!("u{i:02}");
        records.push(identity(&id, &t1, &format!("User {i}")));
        records.push(upr_score(&id, &t1, [40, 70, 70, 90][i % 4], &today));
        records.push(recommendation(&format!("r{i:02}"), &t1, &id));
    }
    for i in 0..31 {
        let mut f = finding(
            &format!("f{i:02}"),
            &t1,
            ["critical", "high", "low"][i % 3],
            "open",
            &format!("u{:02}", i % 23),
        );
        f["detectedAt"] = json!(format!("2026-10-0{}T00:00:00Z", 1 + i % 2));
        records.push(f);
    }
    app.ingest(customer, &records).await;
    let key = app.key_with_every_scope(customer).await;
    for i in 0..7 {
        let response = app
            .client
            .post(app.url("/api/v1/webhooks"))
            .bearer_auth(&key)
            .json(
                &json!({"name": format!("W{i}"), "webhookUrl": "https://hooks.example.com/p",
                          "webhookType": "generic", "eventTypes": ["finding_critical"]}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    (customer, key)
}

fn ids(body: &Value, pointer: &str) -> Vec<String> {
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row.pointer(pointer).unwrap().as_str().unwrap().to_owned())
        .collect()
}

/// The whole list read with `offset`, page by page.
async fn by_offset(app: &TestApp, key: &str, path: &str, pointer: &str) -> Vec<String> {
    let mut all = Vec::new();
    loop {
        let url = format!("{path}?limit=4&offset={}", all.len());
        let body = app.get_json(&url, key, StatusCode::OK).await;
        let page = ids(&body, pointer);
        if page.is_empty() {
            return all;
        }
        all.extend(page);
    }
}

/// The whole list read by following `meta.nextCursor`; checks the `Link` header agrees.
async fn by_cursor(app: &TestApp, key: &str, path: &str, pointer: &str) -> Vec<String> {
    let mut all = Vec::new();
    let mut url = format!("{path}?limit=4");
    loop {
        let response = app.get(&url, key).await;
        assert_eq!(response.status(), StatusCode::OK, "{url}");
        let link = response
            .headers()
            .get("link")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = response.json().await.unwrap();
        all.extend(ids(&body, pointer));
        match body["meta"]["nextCursor"].as_str() {
            None => {
                assert!(body["meta"]["nextCursor"].is_null(), "{body}");
                assert_eq!(link, None, "no Link on the last page of {path}");
                return all;
            }
            Some(cursor) => {
                let link = link.unwrap_or_else(|| panic!("{url}: a next page without Link"));
                let next = format!("{path}?limit=4&after={cursor}");
                assert_eq!(link, format!("<{next}>; rel=\"next\""));
                url = next;
            }
        }
    }
}

#[tokio::test]
async fn every_list_reads_the_same_rows_in_the_same_order_by_cursor_as_by_offset() {
    let app = TestApp::start().await;
    let (_, key) = dataset(&app).await;
    for (path, pointer) in LISTS {
        let offset = by_offset(&app, &key, path, pointer).await;
        let cursor = by_cursor(&app, &key, path, pointer).await;
        assert!(offset.len() > 4, "{path}: {} rows", offset.len());
        assert_eq!(cursor, offset, "{path}");
        let mut unique = cursor.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), cursor.len(), "{path}: a row twice");
    }
}

#[tokio::test]
async fn a_cursor_keeps_the_filters_and_the_page_size_may_change() {
    let app = TestApp::start().await;
    let (_, key) = dataset(&app).await;
    let first = app
        .get_json(
            "/api/v1/findings?severity=critical&limit=3",
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(first["meta"]["total"], 11);
    let cursor = first["meta"]["nextCursor"].as_str().unwrap();
    let rest = app
        .get_json(
            &format!("/api/v1/findings?limit=50&severity=critical&after={cursor}"),
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(rest["meta"]["total"], 11, "meta.total stays");
    assert_eq!(rest["meta"]["offset"], 0);
    assert_eq!(rest["data"].as_array().unwrap().len(), 8);
    assert!(rest["meta"]["nextCursor"].is_null());
    assert!(
        rest["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["severity"] == "critical")
    );
}

#[tokio::test]
async fn after_with_offset_is_400() {
    let app = TestApp::start().await;
    let (_, key) = dataset(&app).await;
    let first = app
        .get_json("/api/v1/findings?limit=3", &key, StatusCode::OK)
        .await;
    let cursor = first["meta"]["nextCursor"].as_str().unwrap();
    // Not a cursor to start again without: `invalid`, not `cursor_mismatch`.
    let reason = assert_refused(
        app.get(&format!("/api/v1/findings?offset=3&after={cursor}"), &key)
            .await,
        StatusCode::BAD_REQUEST,
        "after",
        Refusal::Invalid,
    )
    .await;
    assert!(reason.contains("offset"), "{reason}");
}

#[tokio::test]
async fn after_with_the_default_offset_of_zero_is_the_cursors_page() {
    // Generated clients send every parameter's default, `offset=0` included.
    let app = TestApp::start().await;
    let (_, key) = dataset(&app).await;
    let first = app
        .get_json("/api/v1/findings?limit=3&offset=0", &key, StatusCode::OK)
        .await;
    let cursor = first["meta"]["nextCursor"].as_str().unwrap();
    let plain = app
        .get_json(
            &format!("/api/v1/findings?limit=3&after={cursor}"),
            &key,
            StatusCode::OK,
        )
        .await;
    let with_zero = app
        .get_json(
            &format!("/api/v1/findings?limit=3&offset=0&after={cursor}"),
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(plain["data"], with_zero["data"]);
    assert_ne!(plain["data"], first["data"]);
}

/// Asserts the request is refused as a cursor that does not match it.
async fn refused_as_mismatch(app: &TestApp, key: &str, url: &str) {
    let reason = assert_refused(
        app.get(url, key).await,
        StatusCode::BAD_REQUEST,
        "after",
        Refusal::CursorMismatch,
    )
    .await;
    assert!(
        reason.contains("cursor does not match this request"),
        "{url}: {reason}"
    );
}

#[tokio::test]
async fn a_tampered_cursor_is_refused_as_not_matching() {
    let app = TestApp::start().await;
    let (_, key) = dataset(&app).await;
    let first = app
        .get_json("/api/v1/findings?limit=3", &key, StatusCode::OK)
        .await;
    let cursor = first["meta"]["nextCursor"].as_str().unwrap().to_owned();
    for i in [0, 10, cursor.len() / 2, cursor.len() - 2] {
        let mut bytes = cursor.clone().into_bytes();
        bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap();
        refused_as_mismatch(&app, &key, &format!("/api/v1/findings?after={tampered}")).await;
    }
}

#[tokio::test]
async fn a_cursor_of_another_customer_route_or_filter_set_is_refused() {
    let app = TestApp::start().await;
    let (_, key) = dataset(&app).await;
    let (other, _) = app.customer_with_one_of_each("B").await;
    let other_key = app.key_with_every_scope(other).await;
    let first = app
        .get_json("/api/v1/findings?status=open&limit=3", &key, StatusCode::OK)
        .await;
    let cursor = first["meta"]["nextCursor"].as_str().unwrap();
    refused_as_mismatch(
        &app,
        &other_key,
        &format!("/api/v1/findings?status=open&after={cursor}"),
    )
    .await;
    refused_as_mismatch(&app, &key, &format!("/api/v1/identities?after={cursor}")).await;
    refused_as_mismatch(
        &app,
        &key,
        &format!("/api/v1/findings?status=resolved&after={cursor}"),
    )
    .await;
    refused_as_mismatch(&app, &key, &format!("/api/v1/findings?after={cursor}")).await;
}

#[tokio::test]
async fn a_cursor_from_before_a_key_rotation_says_to_restart_from_the_first_page() {
    let app = TestApp::start().await;
    let (customer, key) = dataset(&app).await;
    // A cursor this request would have had under another server key.
    let old_key = CursorKey::derive(&[0x5a; 32]);
    let cursor = old_key.seal(
        &Cursor {
            after: SortKey(vec![KeyPart::Text("u03".into())]),
            through: None,
        },
        &CursorContext {
            customer: customer.customer_id(),
            route: "/api/v1/identities",
            filters: "",
        },
    );
    let reason = assert_refused(
        app.get(&format!("/api/v1/identities?after={cursor}"), &key)
            .await,
        StatusCode::BAD_REQUEST,
        "after",
        Refusal::CursorMismatch,
    )
    .await;
    assert!(reason.contains("restart from the first page"), "{reason}");
}
