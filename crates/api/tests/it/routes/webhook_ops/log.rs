//! `GET /webhooks/{id}/deliveries[/{deliveryId}]` and redelivery.

use std::collections::BTreeSet;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use wiremock::{Mock, ResponseTemplate, matchers::method};

use super::{Ops, header, hook, receiver};
use crate::support::assert_error;

#[tokio::test]
async fn the_log_shows_each_delivery_with_its_outcome_and_the_detail_its_attempts() {
    let ops = Ops::new().await;
    let server = wiremock::MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("receiver-private-text"))
        .mount(&server)
        .await;
    let (webhook, _) = ops
        .subscribe(&hook(&server), "generic", &["finding_high"])
        .await;
    ops.pass(&[("h1", "high"), ("h2", "high")]).await;
    assert_eq!(ops.worker(3).drain().await.unwrap(), 1);

    let log = ops.log(&webhook).await;
    assert_eq!(log.len(), 1);
    let entry = &log[0];
    assert_eq!(entry["eventType"], "finding_high");
    assert_eq!(entry["status"], "pending", "retrying: {entry}");
    assert_eq!(entry["trigger"], "event");
    assert_eq!(entry["findingCount"], 2);
    assert_eq!(entry["attempts"], 1);
    assert_eq!(entry["lastStatusCode"], 500);
    assert_eq!(entry["lastError"], "HTTP 500");
    assert!(entry["lastAttemptAt"].is_string());
    assert!(
        entry["nextAttemptAt"].is_string(),
        "pending: tried next then"
    );

    let id = entry["id"].as_str().unwrap();
    // Event deliveries' ids are of the kind of every id posture makes (test deliveries',
    // passes'): UUIDv7, ordered by creation.
    let version = id.parse::<uuid::Uuid>().unwrap().get_version_num();
    assert_eq!(version, 7, "{id}");
    let created = chrono::DateTime::parse_from_rfc3339(entry["createdAt"].as_str().unwrap())
        .unwrap()
        .timestamp_millis();
    let (seconds, nanos) = id
        .parse::<uuid::Uuid>()
        .unwrap()
        .get_timestamp()
        .unwrap()
        .to_unix();
    let minted = i64::try_from(seconds).unwrap() * 1000 + i64::from(nanos / 1_000_000);
    assert!(
        (minted - created).abs() < 5_000,
        "{id}: {minted} vs {created}"
    );
    let detail = ops
        .json(
            Method::GET,
            &format!("/webhooks/{webhook}/deliveries/{id}"),
            None,
            StatusCode::OK,
        )
        .await;
    let text = detail.to_string();
    let detail = &detail["data"];
    assert_eq!(detail["id"], id);
    assert_eq!(detail["findingIds"], serde_json::json!(["h1", "h2"]));
    let attempts = detail["attemptLog"].as_array().unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["statusCode"], 500);
    assert_eq!(attempts[0]["error"], "HTTP 500");
    assert!(attempts[0]["latencyMs"].is_u64() && attempts[0]["at"].is_string());
    assert!(
        !text.contains("receiver-private-text"),
        "receivers' answers are never shown"
    );
    assert_eq!(
        server.received_requests().await.unwrap()[0]
            .headers
            .get("x-service-delivery")
            .unwrap(),
        id,
        "the log's id is the delivery's header"
    );
}

/// The event types of the log entries matching `query` (one page), having checked that
/// `meta.total` counts them.
async fn only(ops: &Ops, webhook: &str, query: &str) -> Vec<String> {
    let path = format!("/api/v1/webhooks/{webhook}/deliveries?{query}");
    let page = ops.app.get_json(&path, &ops.key, StatusCode::OK).await;
    let types: Vec<String> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["eventType"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(page["meta"]["total"], types.len(), "meta.total of {query}");
    types
}

/// Five deliveries of one subscription: passes with new findings of mixed severities.
async fn five_deliveries(ops: &Ops) -> String {
    let server = receiver(204).await;
    let (webhook, _) = ops
        .subscribe(
            &hook(&server),
            "generic",
            &["finding_critical", "finding_high", "finding_low"],
        )
        .await;
    ops.pass(&[("c1", "critical"), ("l1", "low")]).await;
    ops.pass(&[("h1", "high")]).await;
    ops.pass(&[("c2", "critical"), ("h2", "high")]).await;
    assert_eq!(ops.worker(1).drain().await.unwrap(), 5);
    // Keep the receiver alive as long as the test runs.
    std::mem::forget(server);
    webhook
}

#[tokio::test]
async fn the_log_pages_newest_first_with_a_cursor_and_filters() {
    let ops = Ops::new().await;
    let webhook = five_deliveries(&ops).await;
    let all = ops.log(&webhook).await;
    assert_eq!(all.len(), 5);
    let created: Vec<&str> = all
        .iter()
        .map(|d| d["createdAt"].as_str().unwrap())
        .collect();
    let mut sorted = created.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(created, sorted, "newest first");

    let mut path = format!("/api/v1/webhooks/{webhook}/deliveries?limit=2");
    let mut paged = Vec::new();
    let mut pages = 0;
    loop {
        let page = ops.app.get_json(&path, &ops.key, StatusCode::OK).await;
        assert_eq!(page["meta"]["total"], 5);
        paged.extend(page["data"].as_array().unwrap().iter().cloned());
        pages += 1;
        match page["meta"]["nextCursor"].as_str() {
            Some(cursor) => {
                path = format!("/api/v1/webhooks/{webhook}/deliveries?limit=2&after={cursor}")
            }
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(
        paged, all,
        "the cursor walk reads the same rows in the same order"
    );

    assert_eq!(
        only(&ops, &webhook, "eventType=finding_critical")
            .await
            .len(),
        2
    );
    assert_eq!(
        only(&ops, &webhook, "eventType=finding_low").await,
        vec!["finding_low"]
    );
    assert_eq!(only(&ops, &webhook, "status=delivered").await.len(), 5);
    assert_eq!(
        only(&ops, &webhook, "status=delivered&eventType=finding_high")
            .await
            .len(),
        2
    );
    assert!(only(&ops, &webhook, "status=failed").await.is_empty());
    assert_eq!(ops.app.db.assert_delivery_totals().await, 5);
    assert!(
        only(&ops, &webhook, "createdSince=2999-01-01T00:00:00Z")
            .await
            .is_empty()
    );
    assert_eq!(
        only(&ops, &webhook, "createdSince=2000-01-01T00:00:00Z")
            .await
            .len(),
        5
    );
    for bad in [
        "status=lost",
        "eventType=finding_urgent",
        "createdSince=yesterday",
    ] {
        let response = ops
            .app
            .get(
                &format!("/api/v1/webhooks/{webhook}/deliveries?{bad}"),
                &ops.key,
            )
            .await;
        assert_error(response, StatusCode::BAD_REQUEST, "invalid_request").await;
    }
}

#[tokio::test]
async fn a_cursor_of_one_subscriptions_log_is_refused_on_anothers() {
    let ops = Ops::new().await;
    let webhook = five_deliveries(&ops).await;
    let (other, _) = ops
        .subscribe("http://127.0.0.1:9/other", "generic", &["finding_low"])
        .await;
    let page = ops
        .app
        .get_json(
            &format!("/api/v1/webhooks/{webhook}/deliveries?limit=1"),
            &ops.key,
            StatusCode::OK,
        )
        .await;
    let cursor = page["meta"]["nextCursor"].as_str().unwrap();
    let response = ops
        .app
        .get(
            &format!("/api/v1/webhooks/{other}/deliveries?limit=1&after={cursor}"),
            &ops.key,
        )
        .await;
    let reason = assert_error(response, StatusCode::BAD_REQUEST, "invalid_request").await;
    assert!(reason.starts_with("after: "), "{reason}");
}

#[tokio::test]
async fn another_customers_subscription_and_deliveries_are_404() {
    let ops = Ops::new().await;
    let webhook = five_deliveries(&ops).await;
    let delivery = ops.log(&webhook).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let b_ops = ops.sibling("B").await;
    let (b_webhook, _) = b_ops
        .subscribe("http://127.0.0.1:9/b", "generic", &["finding_low"])
        .await;
    for (path, reason) in [
        (
            format!("/webhooks/{webhook}/deliveries"),
            "webhook subscription not found",
        ),
        (
            format!("/webhooks/{webhook}/deliveries/{delivery}"),
            "webhook subscription not found",
        ),
        (
            format!("/webhooks/{b_webhook}/deliveries/{delivery}"),
            "delivery not found",
        ),
        (
            format!("/webhooks/{b_webhook}/deliveries/not-a-uuid"),
            "delivery not found",
        ),
    ] {
        let response = b_ops.call(Method::GET, &path, None).await;
        assert_eq!(
            assert_error(response, StatusCode::NOT_FOUND, "not_found").await,
            reason,
            "{path}"
        );
    }
    let response = b_ops
        .call(
            Method::POST,
            &format!("/webhooks/{b_webhook}/deliveries/{delivery}/redeliver"),
            None,
        )
        .await;
    assert_error(response, StatusCode::NOT_FOUND, "not_found").await;
    assert!(
        b_ops.log(&b_webhook).await.is_empty(),
        "B sees nothing of A's"
    );
    let statuses: BTreeSet<String> = ops
        .log(&webhook)
        .await
        .iter()
        .map(|d| d["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        statuses,
        BTreeSet::from(["delivered".to_owned()]),
        "untouched"
    );
}

#[tokio::test]
async fn a_key_that_reads_no_finding_cannot_send_past_findings_again() {
    let ops = Ops::new().await;
    let webhook = five_deliveries(&ops).await;
    let before = ops.log(&webhook).await;
    let delivery = before[0]["id"].as_str().unwrap().to_owned();
    // The same customer's key that may manage webhooks (and point this one anywhere) but
    // not read findings.
    let (_, key) = ops
        .app
        .key(ops.customer, &[posture_domain::Scope::ManageWebhooks])
        .await;
    let webhooks_only = Ops::with_key(ops.app.clone(), ops.customer, &ops.tenant, &key);
    let since = (chrono::Utc::now() - chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    for (path, body) in [
        (
            format!("/webhooks/{webhook}/deliveries/{delivery}/redeliver"),
            None,
        ),
        (
            format!("/webhooks/{webhook}/recover"),
            Some(serde_json::json!({ "since": since })),
        ),
    ] {
        let response = webhooks_only.call(Method::POST, &path, body).await;
        assert_eq!(
            response.headers()["www-authenticate"],
            "Bearer error=\"insufficient_scope\", scope=\"read:findings\"",
            "{path}"
        );
        let reason = assert_error(response, StatusCode::FORBIDDEN, "insufficient_scope").await;
        assert_eq!(reason, "requires scope read:findings", "{path}");
    }
    // It still reads the log, and nothing was queued again.
    assert_eq!(webhooks_only.log(&webhook).await, before);
}

#[tokio::test]
async fn redelivery_sends_the_same_bytes_under_the_same_id_and_a_pending_one_is_409() {
    let ops = Ops::new().await;
    let server = receiver(200).await;
    let (webhook, _) = ops
        .subscribe(&hook(&server), "generic", &["finding_critical"])
        .await;
    ops.pass(&[("c1", "critical")]).await;
    let worker = ops.worker(3);
    assert_eq!(worker.drain().await.unwrap(), 1);
    let id = ops.log(&webhook).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/webhooks/{webhook}/deliveries/{id}/redeliver");

    let queued = ops
        .json(Method::POST, &path, None, StatusCode::ACCEPTED)
        .await;
    assert_eq!(queued["data"]["status"], "pending");
    assert_eq!(queued["data"]["trigger"], "redelivery");
    assert_eq!(
        queued["data"]["attempts"], 1,
        "earlier attempts stay counted"
    );
    let again = ops.call(Method::POST, &path, None).await;
    let reason = assert_error(again, StatusCode::CONFLICT, "conflict").await;
    assert!(reason.contains("pending"), "{reason}");

    assert_eq!(worker.drain().await.unwrap(), 1);
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body, requests[1].body, "the same bytes");
    assert_eq!(
        header(&requests[0], "x-service-delivery"),
        header(&requests[1], "x-service-delivery")
    );
    assert_eq!(header(&requests[1], "webhook-id"), id);
    let entry: Value = ops.log(&webhook).await[0].clone();
    assert_eq!(entry["status"], "delivered");
    assert_eq!(entry["attempts"], 2);
    assert_eq!(entry["nextAttemptAt"], Value::Null);
}
