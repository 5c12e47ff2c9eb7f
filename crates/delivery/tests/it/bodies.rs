//! One body per chunk of events: the findings a chunk carries are read at its first attempt
//! and kept once, every subscription's delivery is rendered from them at every attempt, and
//! the retention sweep deletes them once no delivery of the chunk is left.

use posture_domain::delivery::DeliveryStatus;
use serde_json::Value;

use crate::support::{Setup, failing_first, finding, hook_url, receiver};

fn findings_of(body: &[u8]) -> Value {
    let body: Value = serde_json::from_slice(body).unwrap();
    body["data"]["findings"].clone()
}

#[tokio::test]
async fn a_chunks_findings_are_kept_once_and_every_attempt_renders_the_same_bytes_from_them() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let generic = receiver(200).await;
    let slack = receiver(200).await;
    let flaky = failing_first(2).await;
    let critical = &["finding_critical"];
    setup
        .subscribe(customer, &hook_url(&generic), critical)
        .await;
    setup
        .subscribe_as(customer, &hook_url(&slack), "slack", critical)
        .await;
    setup.subscribe(customer, &hook_url(&flaky), critical).await;
    let records: Vec<Value> = (0..150)
        .map(|i| finding(&format!("c{i:03}"), &tenant, "critical"))
        .collect();
    assert_eq!(setup.pass(customer, &records).await.counts.deliveries, 6);
    let worker = setup.worker_retrying_late(true);
    assert_eq!(worker.drain().await.unwrap(), 6);
    assert_eq!(
        setup
            .db
            .count("SELECT count(*) AS n FROM webhook_bodies")
            .await,
        2,
        "one per chunk, not one per subscription"
    );
    assert_eq!(
        setup
            .db
            .count("SELECT count(*) AS n FROM webhook_deliveries WHERE body IS NOT NULL")
            .await,
        0
    );
    // The analyzer changes a finding of the first chunk before the flaky receiver's retry.
    let mut changed = finding("c000", &tenant, "critical");
    changed["title"] = Value::from("Renamed by the next pass");
    setup.pass(customer, &[changed]).await;
    setup
        .db
        .execute("UPDATE webhook_deliveries SET next_attempt_at = now() WHERE status = 'pending'")
        .await;
    assert_eq!(
        worker.drain().await.unwrap(),
        2,
        "the flaky receiver's retries"
    );
    let flaky_requests = flaky.received_requests().await.unwrap();
    assert_eq!(flaky_requests.len(), 4);
    for first in &flaky_requests[..2] {
        let retry = flaky_requests[2..]
            .iter()
            .find(|r| r.headers["x-service-delivery"] == first.headers["x-service-delivery"])
            .unwrap();
        assert_eq!(
            retry.body, first.body,
            "a retry sends the first attempt's bytes"
        );
    }
    // Every subscription's delivery of a chunk carries the same findings, as the chunk's
    // first attempt read them.
    for request in generic.received_requests().await.unwrap() {
        let id = &request.headers["x-service-delivery"];
        let other = flaky_requests
            .iter()
            .find(|r| findings_of(&r.body)[0]["id"] == findings_of(&request.body)[0]["id"])
            .unwrap();
        assert_ne!(&other.headers["x-service-delivery"], id);
        assert_eq!(findings_of(&other.body), findings_of(&request.body));
        assert_ne!(
            findings_of(&request.body)[0]["title"],
            "Renamed by the next pass"
        );
    }
    let slack_texts: Vec<String> = slack
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["text"].to_string())
        .collect();
    assert_eq!(slack_texts.len(), 2, "{slack_texts:?}");
}

#[tokio::test]
async fn the_sweep_deletes_a_chunks_findings_once_no_delivery_of_it_is_left() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let (_ok, _, _) = setup.subscribed(customer, 200, &["finding_critical"]).await;
    let (_failing, _, _) = setup.subscribed(customer, 500, &["finding_critical"]).await;
    setup
        .pass(customer, &[finding("c1", &tenant, "critical")])
        .await;
    let worker = setup.worker_retrying_late(true);
    assert_eq!(worker.drain().await.unwrap(), 2);
    // Both queued 31 days ago: the delivered one is past the retention, the failing one is
    // still pending (retried later).
    for table in ["webhook_deliveries", "webhook_bodies"] {
        setup
            .db
            .execute(&format!(
                "UPDATE {table} SET created_at = \
                 (created_at AT TIME ZONE 'UTC' - interval '31 days') AT TIME ZONE 'UTC'"
            ))
            .await;
    }
    assert_eq!(worker.sweep().await.unwrap(), 1, "the delivered one");
    assert_eq!(
        setup
            .db
            .count("SELECT count(*) AS n FROM webhook_bodies")
            .await,
        1,
        "the pending delivery still needs its chunk's findings"
    );
    let left = setup.deliveries(customer).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].status, DeliveryStatus::Pending);
    setup
        .db
        .execute("UPDATE webhook_deliveries SET status = 'failed'")
        .await;
    assert_eq!(worker.sweep().await.unwrap(), 1);
    assert_eq!(
        setup
            .db
            .count("SELECT count(*) AS n FROM webhook_bodies")
            .await,
        0,
        "no delivery of the chunk is left"
    );
}
