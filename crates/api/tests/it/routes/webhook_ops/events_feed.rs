//! Deliveries lost on purpose, and a consumer who catches up from the events feed: every
//! finding of a delivery names its event, and reading the feed after the last event received
//! gives exactly the events of the lost deliveries.

use std::collections::BTreeSet;

use posture_domain::{
    Scope, delivery::DeliveryStatus, ports::DeliveryRepository, webhook::EventType,
};
use reqwest::StatusCode;
use serde_json::Value;
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

use super::{Ops, hook};

/// The event ids of the received deliveries' bodies.
async fn received_event_ids(server: &MockServer) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for request in server.received_requests().await.unwrap() {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        for finding in body["data"]["findings"].as_array().unwrap() {
            ids.insert(finding["eventId"].as_str().unwrap().to_owned());
        }
    }
    ids
}

#[tokio::test]
async fn a_consumer_who_lost_deliveries_reads_exactly_them_from_the_feed() {
    let ops = Ops::new().await;
    let (_, read_key) = ops.app.key(ops.customer, &[Scope::ReadFindings]).await;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let every_type: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
    ops.subscribe(&hook(&server), "generic", &every_type).await;
    let worker = ops.worker(1);
    ops.pass(&[("f1", "critical"), ("f2", "high")]).await;
    assert_eq!(worker.drain().await.unwrap(), 2);
    let received = received_event_ids(&server).await;
    assert_eq!(received.len(), 2, "one event per finding");

    // The receiver is down: every delivery of the next passes fails, and is lost to it.
    server.reset().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    ops.pass(&[("f3", "medium"), ("f4", "low")]).await;
    ops.pass(&[("f5", "critical")]).await;
    assert_eq!(worker.drain().await.unwrap(), 3);
    let lost: BTreeSet<String> = ops
        .app
        .store
        .list_deliveries(ops.customer, None, Some(DeliveryStatus::Failed), 100)
        .await
        .unwrap()
        .iter()
        .flat_map(|d| d.event_ids.iter().map(ToString::to_string))
        .collect();
    assert_eq!(lost.len(), 3);

    // The consumer reads on from the last event it received: the greatest id it holds.
    let mut after = received.iter().max().unwrap().clone();
    let mut caught_up = Vec::new();
    loop {
        let page = ops
            .app
            .get_json(
                &format!("/api/v1/events?after={after}&limit=1"),
                &read_key,
                StatusCode::OK,
            )
            .await;
        for event in page["data"].as_array().unwrap() {
            caught_up.push(event["id"].as_str().unwrap().to_owned());
        }
        after = page["meta"]["nextCursor"].as_str().unwrap().to_owned();
        if page["meta"]["hasMore"] == false {
            break;
        }
    }
    let caught_up_set: BTreeSet<String> = caught_up.iter().cloned().collect();
    assert_eq!(caught_up.len(), caught_up_set.len(), "each event once");
    assert_eq!(caught_up_set, lost, "exactly the lost deliveries' events");
    assert!(
        received.is_disjoint(&caught_up_set),
        "nothing received twice"
    );
}
