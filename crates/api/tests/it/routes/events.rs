//! The events feed (docs/api.md, "Events"): every finding event of every pass, oldest
//! first, scoped to the key's customer, paged by event id; waiting requests answered by the
//! next pass's commit, bounded per key and customer, and let go when their key is revoked;
//! hostile parameters refused in words.

use std::time::Duration;

use posture_domain::{Refusal, Scope, ports::ApiKeyRepository as _};
use posture_test_support::{fixtures, waits::wait_for};
use reqwest::StatusCode;
use serde_json::Value;

use crate::support::{TestApp, assert_error, assert_refused};

/// `(type, finding id)` of each event of a page.
fn kinds(page: &Value) -> Vec<(String, String)> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["finding"]["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(t, f)| ((*t).to_owned(), (*f).to_owned()))
        .collect()
}

#[tokio::test]
async fn every_event_of_every_pass_is_in_the_feed_in_commit_order() {
    let app = TestApp::start().await;
    let (a, tenant) = app.customer("A").await;
    let (b, b_tenant) = app.customer("B").await;
    let (_, key) = app.key(a, &[Scope::ReadFindings]).await;
    let (_, b_key) = app.key(b, &[Scope::ReadFindings]).await;
    let (_, no_scope) = app.key(a, &[Scope::ReadIdentities]).await;
    let u1 = fixtures::identity("u1", &tenant, "Ada");
    app.ingest(
        a,
        &[
            u1.clone(),
            fixtures::finding("f1", &tenant, "critical", "open", "u1"),
            fixtures::finding("f2", &tenant, "high", "open", "u1"),
        ],
    )
    .await;
    // The second pass resolves f1, raises f2 to critical and finds f3.
    app.ingest(
        a,
        &[
            u1,
            fixtures::finding("f1", &tenant, "critical", "resolved", "u1"),
            fixtures::finding("f2", &tenant, "critical", "open", "u1"),
            fixtures::finding("f3", &tenant, "low", "open", "u1"),
        ],
    )
    .await;
    app.ingest(
        b,
        &[
            fixtures::identity("u9", &b_tenant, "Bo"),
            fixtures::finding("b1", &b_tenant, "critical", "open", "u9"),
        ],
    )
    .await;

    let all = app.get_json("/api/v1/events", &key, StatusCode::OK).await;
    assert_eq!(
        kinds(&all),
        pairs(&[
            ("finding_critical", "f1"),
            ("finding_high", "f2"),
            ("finding_low", "f3"),
            ("finding_resolved", "f1"),
            ("finding_severity_changed", "f2"),
        ]),
        "by pass, then by type and finding id"
    );
    let events = all["data"].as_array().unwrap();
    assert_eq!(
        events[3]["change"],
        serde_json::json!({"field": "status", "from": "open", "to": "resolved"})
    );
    assert_eq!(
        events[4]["change"],
        serde_json::json!({"field": "severity", "from": "high", "to": "critical"})
    );
    assert!(
        events[0].get("change").is_none(),
        "a new finding has no change"
    );
    assert_eq!(
        events[3]["finding"]["status"], "resolved",
        "the finding as it is now"
    );
    assert_eq!(events[0]["analyzerPassId"], events[1]["analyzerPassId"]);
    assert_ne!(events[0]["analyzerPassId"], events[2]["analyzerPassId"]);
    let ids = ids(&all);
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "event ids sort in the feed's order");
    assert_eq!(all["meta"]["hasMore"], false);
    assert_eq!(all["meta"]["nextCursor"], ids[4].as_str());

    // Read on from any id; pages of 2 with their Link.
    let rest = app
        .get_json(
            &format!("/api/v1/events?after={}", ids[1]),
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(self::ids(&rest), ids[2..]);
    // Last-Event-ID (an SSE client's reconnection) reads on the same way, instead of `after`.
    let resumed: Value = app
        .client
        .get(app.url(&format!("/api/v1/events?after={}", ids[4])))
        .bearer_auth(&key)
        .header("last-event-id", &ids[1])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(self::ids(&resumed), ids[2..]);
    // A refusal names the header, not `after`: a client restarting "without `after`" would
    // send the same header again.
    let unknown = uuid::Uuid::now_v7().to_string();
    for (bad, kind) in [
        ("not-an-id", Refusal::Malformed),
        ("{}", Refusal::Malformed),
        (unknown.as_str(), Refusal::CursorMismatch),
    ] {
        let response = app
            .client
            .get(app.url(&format!("/api/v1/events?after={}", ids[1])))
            .bearer_auth(&key)
            .header("last-event-id", bad)
            .send()
            .await
            .unwrap();
        assert_refused(response, StatusCode::BAD_REQUEST, "Last-Event-ID", kind).await;
    }
    let response = app.get("/api/v1/events?limit=2", &key).await;
    let link = response.headers()["link"].to_str().unwrap().to_owned();
    let first: Value = response.json().await.unwrap();
    assert_eq!(first["meta"]["hasMore"], true);
    assert_eq!(first["meta"]["nextCursor"], ids[1].as_str());
    assert_eq!(
        link,
        format!("</api/v1/events?limit=2&after={}>; rel=\"next\"", ids[1])
    );
    let end = app
        .get_json(
            &format!("/api/v1/events?after={}", ids[4]),
            &key,
            StatusCode::OK,
        )
        .await;
    assert!(end["data"].as_array().unwrap().is_empty());
    assert_eq!(
        end["meta"]["nextCursor"],
        ids[4].as_str(),
        "an empty page keeps the place"
    );

    // Filters.
    let lifecycle = app
        .get_json(
            "/api/v1/events?type=finding_resolved,finding_critical",
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(
        kinds(&lifecycle),
        pairs(&[("finding_critical", "f1"), ("finding_resolved", "f1")])
    );
    let created = events[2]["createdAt"].as_str().unwrap();
    let since = app
        .get_json(
            &format!("/api/v1/events?createdSince={}", urlencode(created)),
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(self::ids(&since), ids[2..]);

    // One event; another customer's is not there.
    let one = app
        .get_json(&format!("/api/v1/events/{}", ids[3]), &key, StatusCode::OK)
        .await;
    assert_eq!(one["data"], events[3]);
    assert_error(
        app.get(&format!("/api/v1/events/{}", ids[3]), &b_key).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let of_b = app.get_json("/api/v1/events", &b_key, StatusCode::OK).await;
    assert_eq!(kinds(&of_b), pairs(&[("finding_critical", "b1")]));
    assert_error(
        app.get(&format!("/api/v1/events?after={}", ids[0]), &b_key)
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    )
    .await;
    assert_error(
        app.get("/api/v1/events", &no_scope).await,
        StatusCode::FORBIDDEN,
        "insufficient_scope",
    )
    .await;
}

/// A time as a query value (the API writes times in UTC, `Z`: only a `+` would need escaping).
fn urlencode(text: &str) -> String {
    text.replace('+', "%2B")
}

#[tokio::test]
async fn hostile_parameters_are_refused_in_words() {
    let app = TestApp::start().await;
    let (a, _) = app.customer("A").await;
    let (_, key) = app.key(a, &[Scope::ReadFindings]).await;
    for query in [
        "after=not-an-id",
        &format!("after={}", "f".repeat(5000)),
        "after=",
        "type=finding_nothing",
        "type=",
        "wait=-1",
        "wait=abc",
        "wait=99999999999999999999999",
        "limit=0",
        "createdSince=yesterday",
        &format!("after={}", uuid::Uuid::now_v7()),
    ] {
        let reason = assert_error(
            app.get(&format!("/api/v1/events?{query}"), &key).await,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        )
        .await;
        assert!(!reason.is_empty(), "{query}");
    }
    // Large values of limit and wait are clamped, not refused.
    let clamped = app
        .get_json("/api/v1/events?limit=100000&wait=0", &key, StatusCode::OK)
        .await;
    assert_eq!(clamped["meta"]["limit"], 500);
    // A malformed id is no event, as for every resource.
    assert_error(
        app.get("/api/v1/events/not-an-id", &key).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}

/// A first pass of customer `a` (identity u1, finding f1) read through with `key`: u1's
/// record and the cursor after the pass's events.
async fn first_pass_read(
    app: &TestApp,
    a: posture_domain::CustomerScope,
    tenant: &str,
    key: &str,
) -> (Value, String) {
    let u1 = fixtures::identity("u1", tenant, "Ada");
    app.ingest(
        a,
        &[
            u1.clone(),
            fixtures::finding("f1", tenant, "high", "open", "u1"),
        ],
    )
    .await;
    let first = app.get_json("/api/v1/events", key, StatusCode::OK).await;
    let last = first["meta"]["nextCursor"].as_str().unwrap().to_owned();
    (u1, last)
}

#[tokio::test]
async fn a_waiting_request_is_answered_by_the_next_pass_and_waiters_are_bounded() {
    let app = std::sync::Arc::new(TestApp::start().await);
    let (a, tenant) = app.customer("A").await;
    let (_, key) = app.key(a, &[Scope::ReadFindings]).await;
    let (_, other_key) = app.key(a, &[Scope::ReadFindings]).await;
    let (u1, last) = first_pass_read(&app, a, &tenant, &key).await;

    // Four requests of the key wait (30 s at most); a fifth is refused with Retry-After.
    let waiting: Vec<_> = (0..4)
        .map(|_| {
            let (app, key, last) = (app.clone(), key.clone(), last.clone());
            tokio::spawn(async move {
                let response = app
                    .get(&format!("/api/v1/events?after={last}&wait=30"), &key)
                    .await;
                assert_eq!(response.status(), StatusCode::OK);
                response.json::<Value>().await.unwrap()
            })
        })
        .collect();
    wait_for("four requests waiting", Duration::from_secs(10), || async {
        (app.event_waits.waiting() == 4).then_some(())
    })
    .await;
    let refused = app
        .get(&format!("/api/v1/events?after={last}&wait=30"), &key)
        .await;
    let retry_after = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(retry_after, "1");
    assert_error(refused, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    // Another key of the customer may still wait; without anything new, `wait=0` answers
    // at once.
    let now = app
        .get_json(
            &format!("/api/v1/events?after={last}"),
            &other_key,
            StatusCode::OK,
        )
        .await;
    assert!(now["data"].as_array().unwrap().is_empty());

    // A pass commits: every waiter answers with its events.
    app.ingest(
        a,
        &[
            u1,
            fixtures::finding("f1", &tenant, "high", "open", "u1"),
            fixtures::finding("f2", &tenant, "critical", "open", "u1"),
        ],
    )
    .await;
    for waiter in waiting {
        let page = waiter.await.unwrap();
        assert_eq!(kinds(&page), pairs(&[("finding_critical", "f2")]));
    }
    assert_eq!(app.event_waits.waiting(), 0, "places are given back");
}

#[tokio::test]
async fn a_wait_with_nothing_new_ends_empty_and_shutting_down_ends_it_at_once() {
    let app = std::sync::Arc::new(TestApp::start().await);
    let (a, _) = app.customer("A").await;
    let (_, key) = app.key(a, &[Scope::ReadFindings]).await;
    let empty = app
        .get_json("/api/v1/events?wait=1", &key, StatusCode::OK)
        .await;
    assert!(empty["data"].as_array().unwrap().is_empty());
    assert!(empty["meta"]["nextCursor"].is_null());

    let waiter = tokio::spawn({
        let (app, key) = (app.clone(), key.clone());
        async move { app.get("/api/v1/events?wait=30", &key).await.status() }
    });
    wait_for("a request waiting", Duration::from_secs(10), || async {
        (app.event_waits.waiting() == 1).then_some(())
    })
    .await;
    let started = std::time::Instant::now();
    app.event_waits.stop_waiting();
    assert_eq!(waiter.await.unwrap(), StatusCode::OK);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "answered when shutdown began, not at the end of its wait"
    );
}

#[tokio::test]
async fn a_key_revoked_while_it_waits_reads_nothing_committed_since_and_gives_its_place_back() {
    let app = std::sync::Arc::new(TestApp::start().await);
    let (a, tenant) = app.customer("A").await;
    let (id, key) = app.key(a, &[Scope::ReadFindings]).await;
    let (u1, last) = first_pass_read(&app, a, &tenant, &key).await;
    let waiter = tokio::spawn({
        let (app, key) = (app.clone(), key.clone());
        async move {
            app.get(&format!("/api/v1/events?after={last}&wait=30"), &key)
                .await
        }
    });
    wait_for("a request waiting", Duration::from_secs(10), || async {
        (app.event_waits.waiting() == 1).then_some(())
    })
    .await;

    app.store
        .revoke_key(None, id, &posture_domain::console::Actor::Operator)
        .await
        .unwrap();
    // Once this instance knows of the revocation, a pass commits new events.
    wait_for("the revocation heard", Duration::from_secs(10), || async {
        let status = app.get("/api/v1/keys/current", &key).await.status();
        (status == StatusCode::UNAUTHORIZED).then_some(())
    })
    .await;
    app.ingest(
        a,
        &[
            u1,
            fixtures::finding("f1", &tenant, "high", "open", "u1"),
            fixtures::finding("f2", &tenant, "critical", "open", "u1"),
        ],
    )
    .await;
    let answer = waiter.await.unwrap();
    assert_error(answer, StatusCode::UNAUTHORIZED, "unauthorized").await;
    assert_eq!(app.event_waits.waiting(), 0, "its place is given back");
}

#[tokio::test]
async fn a_finding_the_analyzer_suppresses_is_an_event_of_its_own() {
    let app = std::sync::Arc::new(TestApp::start().await);
    let (a, tenant) = app.customer("A").await;
    let (_, key) = app.key(a, &[Scope::ReadFindings]).await;
    let (u1, last) = first_pass_read(&app, a, &tenant, &key).await;
    app.ingest(
        a,
        &[
            u1,
            fixtures::finding("f1", &tenant, "high", "suppressed", "u1"),
        ],
    )
    .await;
    for query in [
        format!("after={last}"),
        format!("after={last}&type=finding_suppressed"),
    ] {
        let page = app
            .get_json(&format!("/api/v1/events?{query}"), &key, StatusCode::OK)
            .await;
        assert_eq!(
            kinds(&page),
            pairs(&[("finding_suppressed", "f1")]),
            "{query}"
        );
        let event = &page["data"][0];
        assert_eq!(
            event["change"],
            serde_json::json!({"field": "status", "from": "open", "to": "suppressed"})
        );
        assert_eq!(event["finding"]["status"], "suppressed");
    }
}

#[tokio::test]
async fn a_head_of_the_feed_neither_waits_nor_streams() {
    let app = TestApp::start().await;
    let (a, _) = app.customer("A").await;
    let (_, key) = app.key(a, &[Scope::ReadFindings]).await;
    let started = std::time::Instant::now();
    let waited = app
        .client
        .head(app.url("/api/v1/events?wait=30"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(waited.status(), StatusCode::OK);
    assert_eq!(waited.headers()["content-type"], "application/json");
    let stream = app
        .client
        .head(app.url("/api/v1/events"))
        .bearer_auth(&key)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    assert!(stream.bytes().await.unwrap().is_empty());
    assert_eq!(app.event_waits.waiting(), 0, "no place taken");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "answered at once, not after the 30 s wait"
    );
}
