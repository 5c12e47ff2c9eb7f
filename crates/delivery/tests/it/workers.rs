//! Several workers on one queue.

use std::collections::HashMap;

use serde_json::Value;

use crate::support::{Setup, finding, hook_url, receiver};

#[tokio::test]
async fn two_workers_deliver_each_of_1000_deliveries_exactly_once() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let server = receiver(200).await;
    for _ in 0..10 {
        setup
            .subscribe(customer, &hook_url(&server), &["finding_critical"])
            .await;
    }
    let records: Vec<Value> = (0..10_000)
        .map(|i| finding(&format!("c{i:05}"), &tenant, "critical"))
        .collect();
    assert_eq!(setup.pass(customer, &records).await.counts.deliveries, 1000);
    let (first, second) = (setup.worker_with(true, "w1"), setup.worker_with(true, "w2"));
    let (a, b) = tokio::join!(first.drain(), second.drain());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a + b, 1000);
    assert!(a > 0 && b > 0, "both workers took part ({a} and {b})");
    let mut per_delivery: HashMap<String, usize> = HashMap::new();
    for request in server.received_requests().await.unwrap() {
        let id = request
            .headers
            .get("x-service-delivery")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        *per_delivery.entry(id).or_default() += 1;
    }
    assert_eq!(per_delivery.len(), 1000);
    assert!(
        per_delivery.values().all(|n| *n == 1),
        "no delivery was sent twice"
    );
}
