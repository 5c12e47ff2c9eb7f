//! Triage over HTTP: `PATCH /findings/{id}` with `write:findings` and `read:findings`, its
//! strong `ETag` and `If-Match`, the `triage` object in every read, the `triageState` filter,
//! the history, and what a hostile body gets.

use posture_domain::Scope;
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use crate::support::{TestApp, assert_error};

async fn patch(
    app: &TestApp,
    key: &str,
    id: &str,
    body: &Value,
    if_match: Option<&str>,
) -> Response {
    let mut request = app
        .client
        .patch(app.url(&format!("/api/v1/findings/{id}")))
        .bearer_auth(key)
        .json(body);
    if let Some(tag) = if_match {
        request = request.header("if-match", tag);
    }
    request.send().await.unwrap()
}

fn dismiss() -> Value {
    json!({"triage": {"state": "dismissed", "reason": "false_positive",
                      "comment": "Break-glass account"}})
}

fn etag(response: &Response) -> String {
    response.headers()["etag"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn triage_needs_both_finding_scopes() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer_with_one_of_each("A").await;
    for scopes in [
        &[Scope::ReadFindings][..],
        &[Scope::WriteFindings][..],
        &[Scope::ManageWebhooks, Scope::ReadIdentities][..],
    ] {
        let (_, key) = app.key(customer, scopes).await;
        assert_error(
            patch(&app, &key, "f1", &dismiss(), None).await,
            StatusCode::FORBIDDEN,
            "insufficient_scope",
        )
        .await;
    }
    let (_, key) = app.key(customer, &[Scope::ReadFindings]).await;
    let finding = app
        .get_json("/api/v1/findings/f1", &key, StatusCode::OK)
        .await;
    assert_eq!(
        finding["data"]["triage"]["state"], "untriaged",
        "nothing written"
    );
}

#[tokio::test]
async fn a_triage_reads_back_everywhere_with_a_strong_tag() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer_with_one_of_each("A").await;
    let (key_id, key) = app
        .key(customer, &[Scope::ReadFindings, Scope::WriteFindings])
        .await;
    let before = app.get("/api/v1/findings/f1", &key).await;
    let before_tag = etag(&before);
    assert!(before_tag.starts_with('"'), "strong: {before_tag}");
    let written = patch(&app, &key, "f1", &dismiss(), Some(&before_tag)).await;
    assert_eq!(written.status(), StatusCode::OK);
    let tag = etag(&written);
    assert_ne!(tag, before_tag);
    let body: Value = written.json().await.unwrap();
    let triage = &body["data"]["triage"];
    assert_eq!(triage["state"], "dismissed");
    assert_eq!(triage["reason"], "false_positive");
    assert_eq!(triage["comment"], "Break-glass account");
    assert_eq!(triage["updatedBy"]["keyId"], key_id.to_string());
    assert_eq!(triage["updatedBy"]["name"], "test");
    // The detail answers the same tag, and 304 while it holds.
    let detail = app.get("/api/v1/findings/f1", &key).await;
    assert_eq!(etag(&detail), tag);
    let again = app
        .client
        .get(app.url("/api/v1/findings/f1"))
        .bearer_auth(&key)
        .header("if-none-match", &tag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    // The list filter, and a sync by modification, see it; a pass keeps it.
    let dismissed = app
        .get_json(
            "/api/v1/findings?triageState=dismissed",
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(dismissed["meta"]["total"], 1);
    assert_eq!(dismissed["data"][0]["id"], "f1");
    let untriaged = app
        .get_json(
            "/api/v1/findings?triageState=untriaged",
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(untriaged["meta"]["total"], 0);
    app.ingest(
        customer,
        &[posture_test_support::fixtures::finding(
            "f1", &tenant, "critical", "open", "u1",
        )],
    )
    .await;
    let kept = app
        .get_json("/api/v1/findings/f1", &key, StatusCode::OK)
        .await;
    assert_eq!(kept["data"]["triage"], body["data"]["triage"]);
    // The NDJSON export carries it.
    let export = app
        .client
        .get(app.url("/api/v1/findings/export?format=ndjson"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line: Value = serde_json::from_str(export.lines().next().unwrap()).unwrap();
    assert_eq!(line["triage"]["state"], "dismissed");
}

#[tokio::test]
async fn if_match_lets_one_of_two_concurrent_writers_win() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer_with_one_of_each("A").await;
    let (_, key) = app
        .key(customer, &[Scope::ReadFindings, Scope::WriteFindings])
        .await;
    let tag = etag(&app.get("/api/v1/findings/f1", &key).await);
    let ack = json!({"triage": {"state": "acknowledged"}});
    let dismissal = dismiss();
    let (a, b) = tokio::join!(
        patch(&app, &key, "f1", &dismissal, Some(&tag)),
        patch(&app, &key, "f1", &ack, Some(&tag)),
    );
    let mut statuses = [a.status(), b.status()];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::OK, StatusCode::PRECONDITION_FAILED]);
    let loser = if a.status() == StatusCode::OK { b } else { a };
    assert_error(
        loser,
        StatusCode::PRECONDITION_FAILED,
        "precondition_failed",
    )
    .await;
    // Without If-Match the last write wins and the history has both.
    let reset = json!({"triage": {"state": "untriaged"}});
    assert_eq!(
        patch(&app, &key, "f1", &reset, None).await.status(),
        StatusCode::OK
    );
    let history = app
        .get_json("/api/v1/findings/f1/triage?limit=1", &key, StatusCode::OK)
        .await;
    assert_eq!(history["meta"]["total"], 2);
    assert_eq!(history["data"][0]["to"], "untriaged", "newest first");
    let next = history["meta"]["nextCursor"].as_str().unwrap().to_owned();
    let rest = app
        .get_json(
            &format!("/api/v1/findings/f1/triage?limit=1&after={next}"),
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(rest["data"][0]["from"], "untriaged");
    assert_eq!(rest["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn hostile_triage_bodies_are_refused_and_change_nothing() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer_with_one_of_each("A").await;
    let (other, _) = app.customer_with_one_of_each("B").await;
    let _ = other;
    let key = app.key_with_every_scope(customer).await;
    let in_days = |days: i64| (chrono::Utc::now() + chrono::Duration::days(days)).to_rfc3339();
    let refused: [(Value, StatusCode, &str); 9] = [
        (
            json!({"triage": {"state": "closed"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "triage.state",
        ),
        (
            json!({"triage": {"state": "dismissed"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "triage.reason",
        ),
        (
            json!({"triage": {"state": "dismissed", "reason": "because"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "triage.reason",
        ),
        (
            json!({"triage": {"state": "untriaged", "reason": "other"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "triage.reason",
        ),
        (
            json!({"triage": {"state": "acknowledged", "expiresAt": in_days(-1)}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "triage.expiresAt",
        ),
        (
            json!({"triage": {"state": "acknowledged", "expiresAt": in_days(365 * 30)}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "triage.expiresAt",
        ),
        (
            json!({"triage": {"state": "acknowledged", "comment": "ring \u{7} bell"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "triage.comment",
        ),
        (
            json!({"triage": {"state": "acknowledged", "comment": "x".repeat(2001)}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "triage.comment",
        ),
        (
            json!({"triage": {"state": "acknowledged", "owner": "me"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "",
        ),
    ];
    for (body, status, field) in refused {
        let response = patch(&app, &key, "f1", &body, None).await;
        assert_eq!(response.status(), status, "{body}");
        let error: Value = response.json().await.unwrap();
        assert!(
            error["reason"].as_str().unwrap().starts_with(field),
            "{body}: {error}"
        );
    }
    let huge = json!({"triage": {"state": "acknowledged", "comment": "x".repeat(1 << 20)}});
    assert_error(
        patch(&app, &key, "f1", &huge, None).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    )
    .await;
    // Another customer's finding (B has an `f1` too, but this is A's key): A's own is
    // written, B's stays untouched; an unknown id is 404.
    assert_error(
        patch(&app, &key, "nothing-here", &dismiss(), None).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let b_key = app.key_with_every_scope(other).await;
    assert_eq!(
        patch(&app, &key, "f1", &dismiss(), None).await.status(),
        StatusCode::OK
    );
    let b = app
        .get_json("/api/v1/findings/f1", &b_key, StatusCode::OK)
        .await;
    assert_eq!(b["data"]["triage"]["state"], "untriaged");
    let history = app
        .get_json("/api/v1/findings/f1/triage", &key, StatusCode::OK)
        .await;
    assert_eq!(history["meta"]["total"], 1, "only the one accepted write");
}

#[tokio::test]
async fn a_triage_is_an_event_of_the_feed_that_webhooks_may_subscribe_to() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer_with_one_of_each("A").await;
    let (_, key) = app
        .key(
            customer,
            &[
                Scope::ReadFindings,
                Scope::WriteFindings,
                Scope::ManageWebhooks,
            ],
        )
        .await;
    let created = app
        .client
        .post(app.url("/api/v1/webhooks"))
        .bearer_auth(&key)
        .json(
            &json!({"name": "triage", "webhookUrl": "https://hooks.example.com/t",
                      "webhookType": "generic",
                      "eventTypes": ["finding_triaged", "finding_triage_expired"]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    assert_eq!(
        patch(&app, &key, "f1", &dismiss(), None).await.status(),
        StatusCode::OK
    );
    let events = app
        .get_json("/api/v1/events?type=finding_triaged", &key, StatusCode::OK)
        .await;
    let events = events["data"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event["finding"]["id"], "f1");
    assert_eq!(event["finding"]["triage"]["state"], "dismissed");
    assert_eq!(
        event["change"],
        json!({"field": "triageState", "from": "untriaged", "to": "dismissed"})
    );
    // The event names the change that made it: the write's history entry.
    let history = app
        .get_json("/api/v1/findings/f1/triage", &key, StatusCode::OK)
        .await;
    assert_eq!(event["analyzerPassId"], history["data"][0]["id"]);
    // The feed without a filter has it too, after the pass's events.
    let all = app.get_json("/api/v1/events", &key, StatusCode::OK).await;
    let last = all["data"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["id"], event["id"]);
}
