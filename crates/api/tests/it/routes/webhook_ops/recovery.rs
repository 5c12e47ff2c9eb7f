//! `POST /webhooks/{id}/recover`: after a receiver outage, what failed in a window is sent
//! again, oldest first.

use chrono::{Duration, SecondsFormat, Utc};
use reqwest::{Method, StatusCode};
use serde_json::json;
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

use super::{Ops, header, hook};
use crate::support::assert_error;

fn time(t: chrono::DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

#[tokio::test]
async fn an_outage_is_recovered_oldest_first_within_the_window_and_one_recovery_at_a_time() {
    let ops = Ops::new().await;
    // Down for the first three attempts, then back.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(3)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .with_priority(2)
        .mount(&server)
        .await;
    let (webhook, _) = ops
        .subscribe(&hook(&server), "generic", &["finding_critical"])
        .await;
    let worker = ops.worker_with(1, 1);
    ops.pass(&[("c1", "critical")]).await;
    assert_eq!(worker.drain().await.unwrap(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let window_start = Utc::now();
    ops.pass(&[("c2", "critical")]).await;
    ops.pass(&[("c3", "critical")]).await;
    assert_eq!(worker.drain().await.unwrap(), 2);
    let log = ops.log(&webhook).await;
    assert!(log.iter().all(|d| d["status"] == "failed"), "the outage");
    let (c3, c2, c1) = (
        log[0]["id"].as_str().unwrap().to_owned(),
        log[1]["id"].as_str().unwrap().to_owned(),
        log[2]["id"].as_str().unwrap().to_owned(),
    );

    let path = format!("/webhooks/{webhook}/recover");
    let recover = |since: chrono::DateTime<Utc>| {
        ops.call(Method::POST, &path, Some(json!({ "since": time(since) })))
    };
    let requeued = recover(window_start).await;
    assert_eq!(requeued.status(), StatusCode::ACCEPTED);
    let body: serde_json::Value = requeued.json().await.unwrap();
    assert_eq!(
        body["data"]["requeued"], 2,
        "c2 and c3; c1 is before the window"
    );
    let busy = recover(window_start).await;
    let reason = assert_error(busy, StatusCode::CONFLICT, "conflict").await;
    assert!(reason.contains("recovery is in progress"), "{reason}");

    assert_eq!(worker.drain().await.unwrap(), 2);
    let requests = server.received_requests().await.unwrap();
    let sent: Vec<&str> = requests[3..]
        .iter()
        .map(|r| header(r, "x-service-delivery"))
        .collect();
    assert_eq!(sent, vec![c2.as_str(), c3.as_str()], "oldest first");
    let log = ops.log(&webhook).await;
    for entry in &log[..2] {
        assert_eq!(entry["status"], "delivered");
        assert_eq!(entry["trigger"], "recovery");
        assert_eq!(entry["attempts"], 2);
    }
    assert_eq!(log[2]["id"], c1.as_str());
    assert_eq!(log[2]["status"], "failed");

    // Done: the next recovery may start, and delivered ones are not sent again.
    let wider = recover(window_start - Duration::hours(1)).await;
    let body: serde_json::Value = wider.json().await.unwrap();
    assert_eq!(body["data"]["requeued"], 1, "only c1");
    // Failed, pending again, delivered: the log's totals followed every change.
    assert!(ops.app.db.assert_delivery_totals().await >= 3);
}

#[tokio::test]
async fn a_reversed_window_or_one_past_the_retention_is_422() {
    let ops = Ops::new().await;
    let (webhook, _) = ops
        .subscribe("http://127.0.0.1:9/hook", "generic", &["finding_low"])
        .await;
    let path = format!("/webhooks/{webhook}/recover");
    let now = Utc::now();
    for (body, names) in [
        (
            json!({"since": time(now - Duration::hours(1)), "until": time(now - Duration::hours(2))}),
            "until",
        ),
        (json!({"since": time(now - Duration::days(31))}), "30 days"),
        (json!({"until": time(now)}), "since"),
        (json!({"since": "yesterday"}), "since"),
        (json!({"since": time(now), "also": 1}), "also"),
    ] {
        let response = ops.call(Method::POST, &path, Some(body.clone())).await;
        let reason = assert_error(
            response,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unprocessable_entity",
        )
        .await;
        assert!(reason.contains(names), "{body}: {reason}");
    }
    let b = ops.sibling("B").await;
    let foreign = b
        .call(
            Method::POST,
            &path,
            Some(json!({"since": time(now - Duration::hours(1))})),
        )
        .await;
    assert_error(foreign, StatusCode::NOT_FOUND, "not_found").await;
}
