//! Fair shares: one customer's slow receivers and backlog cannot delay another customer's
//! deliveries; claims go round customers and subscriptions; a subscription's deliveries in
//! flight are bounded over every worker.

use std::{sync::Arc, time::Duration};

use posture_delivery::{Worker, WorkerConfig};
use posture_domain::{
    CustomerScope, WebhookId,
    delivery::{DeliveryStatus, RetryPolicy},
    fair_share::{ClaimRequest, FairShare, Lane},
    ports::DeliveryRepository,
};
use serde_json::Value;

use crate::{
    gate::GatedReceiver,
    support::{Setup, eventually, finding, run_in_background, worker_config},
};

/// A worker of `prompt` + `slow` slots whose attempts wait up to a minute (held requests
/// must not time out while a test looks at them).
fn patient_worker(setup: &Setup, id: &str, prompt: usize, slow: usize) -> Arc<Worker> {
    setup.worker_of(WorkerConfig {
        concurrency: prompt,
        slow_concurrency: slow,
        lease: Duration::from_secs(120),
        timeout: Duration::from_secs(60),
        retry: RetryPolicy {
            base: Duration::from_secs(60),
            max_attempts: 4,
        },
        ..worker_config(id)
    })
}

/// `n` new critical findings of `tenant` (ids `{prefix}{i}`): `n / 100` deliveries to each
/// subscription listening.
fn criticals(prefix: &str, tenant: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| finding(&format!("{prefix}{i:05}"), tenant, "critical"))
        .collect()
}

/// Deliveries of `scope` in flight now (leased), by subscription.
async fn in_flight(setup: &Setup, scope: CustomerScope, subscription: WebhookId) -> i64 {
    setup
        .db
        .count(&format!(
            "SELECT count(*) AS n FROM webhook_deliveries \
             WHERE customer_id = '{}' AND subscription_id = '{}' AND status = 'pending' \
               AND lease_until >= now()",
            scope.customer_id().as_uuid(),
            subscription.as_uuid()
        ))
        .await
}

/// Three subscriptions of `customer` to the receiver's held endpoints `held-0` to `held-2`
/// (new critical findings): their names and ids.
async fn held_subscriptions(
    setup: &Setup,
    receiver: &GatedReceiver,
    customer: CustomerScope,
) -> Vec<(String, WebhookId)> {
    let mut held = Vec::new();
    for i in 0..3 {
        let name = format!("held-{i}");
        let (id, _) = setup
            .subscribe(customer, &receiver.url(&name), &["finding_critical"])
            .await;
        held.push((name, id));
    }
    held
}

/// Marks `subscription` as answering after `latency_ms` on average, as its attempts would.
async fn measured(setup: &Setup, scope: CustomerScope, subscription: WebhookId, latency_ms: i32) {
    setup
        .db
        .execute(&format!(
            "INSERT INTO webhook_latency (customer_id, subscription_id, latency_ms, updated_at) \
             VALUES ('{}', '{}', {latency_ms}, now())",
            scope.customer_id().as_uuid(),
            subscription.as_uuid()
        ))
        .await;
}

/// The case of the security review: one customer's three subscriptions point at a receiver
/// that does not answer (held here until the test lets go: as slow as a receiver can be),
/// with 90 deliveries due. Another customer's delivery goes out while every one of those is
/// still held, and the held customer never has more than its bounds in flight.
#[tokio::test]
async fn a_customer_whose_receivers_hang_cannot_delay_another_customers_delivery() {
    let setup = Setup::new().await;
    let receiver = GatedReceiver::start();
    let (noisy, noisy_tenant) = setup.customer("Noisy").await;
    let held = held_subscriptions(&setup, &receiver, noisy).await;
    let queued = setup
        .pass(noisy, &criticals("n", &noisy_tenant, 3000))
        .await
        .counts
        .deliveries;
    assert_eq!(queued, 90);
    let (quiet, quiet_tenant) = setup.customer("Quiet").await;
    setup
        .subscribe(quiet, &receiver.url("quiet"), &["finding_critical"])
        .await;
    // 8 prompt slots: a customer holds 7 at most, the eighth is the others' reserve.
    let stop = run_in_background(patient_worker(&setup, "w1", 8, 2));
    eventually("the noisy customer holds 7 slots", || async {
        held.iter()
            .map(|(name, _)| receiver.open_at(name))
            .sum::<usize>()
            == 7
    })
    .await;
    setup
        .pass(quiet, &[finding("q1", &quiet_tenant, "critical")])
        .await;
    eventually("the quiet customer's delivery arrives", || async {
        receiver.received_at("quiet") == 1
    })
    .await;
    let open: usize = held.iter().map(|(name, _)| receiver.open_at(name)).sum();
    assert_eq!(open, 7, "every noisy request was still held meanwhile");
    for (name, id) in &held {
        assert!(receiver.most_at(name) <= 4, "{name}: at most 4 in flight");
        assert!(in_flight(&setup, noisy, *id).await <= 4);
    }
    receiver.open();
    eventually("every noisy delivery arrives", || async {
        let deliveries = setup.deliveries(noisy).await;
        deliveries
            .iter()
            .all(|d| d.status == DeliveryStatus::Delivered)
    })
    .await;
    for (name, _) in &held {
        assert_eq!(receiver.received_at(name), 30);
        assert!(receiver.most_at(name) <= 4, "{name}: at most 4 in flight");
    }
    stop.send_replace(true);
}

/// A subscription recognised slow by its latency is served on the slow lane only: it never
/// takes a prompt slot, and within the slow lane a customer leaves the others a reserve.
#[tokio::test]
async fn slow_subscriptions_are_served_on_their_own_lane_with_a_reserve_for_others() {
    let setup = Setup::new().await;
    let receiver = GatedReceiver::start();
    let (noisy, noisy_tenant) = setup.customer("Noisy").await;
    let held = held_subscriptions(&setup, &receiver, noisy).await;
    for (_, id) in &held {
        measured(&setup, noisy, *id, 9_000).await;
    }
    setup
        .pass(noisy, &criticals("n", &noisy_tenant, 1000))
        .await;
    let (other, other_tenant) = setup.customer("Other").await;
    let (slow_other, _) = setup
        .subscribe(other, &receiver.url("held-other"), &["finding_high"])
        .await;
    measured(&setup, other, slow_other, 5_000).await;
    setup
        .subscribe(other, &receiver.url("prompt"), &["finding_critical"])
        .await;
    // 8 prompt slots, 4 slow ones: a customer holds 3 of the slow lane at most.
    let stop = run_in_background(patient_worker(&setup, "w1", 8, 4));
    eventually(
        "the slow lane's share of the noisy customer is taken",
        || async {
            held.iter()
                .map(|(name, _)| receiver.open_at(name))
                .sum::<usize>()
                == 3
        },
    )
    .await;
    setup
        .pass(
            other,
            &[
                finding("c1", &other_tenant, "critical"),
                finding("h1", &other_tenant, "high"),
            ],
        )
        .await;
    eventually("the other customer's prompt delivery arrives", || async {
        receiver.received_at("prompt") == 1
    })
    .await;
    eventually(
        "its slow subscription gets the slow lane's reserve",
        || async { receiver.open_at("held-other") == 1 },
    )
    .await;
    assert_eq!(
        held.iter()
            .map(|(name, _)| receiver.open_at(name))
            .sum::<usize>(),
        3,
        "the noisy customer's slow deliveries never took a prompt slot"
    );
    receiver.open();
    stop.send_replace(true);
}

/// A claim goes round customers (each one's first, then each one's second), counting what
/// each has in flight: a customer with a long backlog of older deliveries does not take a
/// claim from one whose deliveries just came due.
#[tokio::test]
async fn claims_go_round_customers_before_taking_more_of_one() {
    let setup = Setup::new().await;
    let receiver = GatedReceiver::start();
    let (busy, busy_tenant) = setup.customer("Busy").await;
    setup
        .subscribe(busy, &receiver.url("busy"), &["finding_critical"])
        .await;
    setup.pass(busy, &criticals("b", &busy_tenant, 5000)).await;
    let (late, late_tenant) = setup.customer("Late").await;
    setup
        .subscribe(late, &receiver.url("late"), &["finding_critical"])
        .await;
    setup.pass(late, &criticals("l", &late_tenant, 500)).await;
    let claim = ClaimRequest::unbounded("w1", 10, Duration::from_secs(60));
    let claimed = setup.store.claim_due(&claim).await.unwrap();
    let of = |scope: CustomerScope, claimed: &[posture_domain::delivery::ClaimedDelivery]| {
        claimed
            .iter()
            .filter(|c| c.delivery.customer_id == scope.customer_id())
            .count()
    };
    assert_eq!(
        of(late, &claimed),
        5,
        "every one of the late customer's five"
    );
    assert_eq!(of(busy, &claimed), 5, "and as many of the busy one's");
    // Within a subscription, the oldest due first, as before.
    let mut busy_claimed: Vec<_> = claimed
        .iter()
        .filter(|c| c.delivery.customer_id == busy.customer_id())
        .map(|c| c.delivery.chunk)
        .collect();
    busy_claimed.sort_unstable();
    assert_eq!(busy_claimed, vec![0, 1, 2, 3, 4]);
    // Each now has 5 in flight, and only the busy one has more due: it takes all of the
    // next claim, as a lone customer uses whatever nobody else wants.
    let four = ClaimRequest {
        limit: 4,
        ..ClaimRequest::unbounded("w1", 100, Duration::from_secs(60))
    };
    let claimed = setup.store.claim_due(&four).await.unwrap();
    assert_eq!(of(busy, &claimed), 4);
}

/// What a subscription has in flight is counted over every worker: a second worker's claim
/// takes nothing more of a subscription at its bound, and the bound of a worker's claim on
/// a customer is the room the worker gives it.
#[tokio::test]
async fn a_subscriptions_deliveries_in_flight_are_bounded_over_every_worker() {
    let setup = Setup::new().await;
    let receiver = GatedReceiver::start();
    let (customer, tenant) = setup.customer("A").await;
    let (first, _) = setup
        .subscribe(customer, &receiver.url("first"), &["finding_critical"])
        .await;
    let (second, _) = setup
        .subscribe(customer, &receiver.url("second"), &["finding_critical"])
        .await;
    setup.pass(customer, &criticals("c", &tenant, 1000)).await;
    let bounded = |worker| ClaimRequest {
        share: FairShare {
            per_subscription: 3,
            ..FairShare::default()
        },
        ..ClaimRequest::unbounded(worker, 100, Duration::from_secs(60))
    };
    let claimed = setup.store.claim_due(&bounded("w1")).await.unwrap();
    assert_eq!(claimed.len(), 6, "3 of each subscription");
    assert_eq!(in_flight(&setup, customer, first).await, 3);
    assert_eq!(in_flight(&setup, customer, second).await, 3);
    let claimed = setup.store.claim_due(&bounded("w2")).await.unwrap();
    assert!(claimed.is_empty(), "both are at their bound");
    // A worker holding 4 of the customer's deliveries on a lane whose share is 5 takes one
    // more at most.
    setup
        .db
        .execute("UPDATE webhook_deliveries SET lease_until = NULL, leased_by = NULL")
        .await;
    let held = ClaimRequest {
        per_customer: 5,
        held: vec![(customer.customer_id(), 4)],
        ..ClaimRequest::unbounded("w1", 100, Duration::from_secs(60))
    };
    assert_eq!(setup.store.claim_due(&held).await.unwrap().len(), 1);
    // The slow lane takes none of these: no subscription was measured slow.
    let slow = ClaimRequest {
        lane: Lane::Slow,
        ..ClaimRequest::unbounded("w1", 100, Duration::from_secs(60))
    };
    assert!(setup.store.claim_due(&slow).await.unwrap().is_empty());
}

/// Each attempt moves its subscription's moving average latency as the domain's rule says.
#[tokio::test]
async fn each_attempt_moves_its_subscriptions_average_latency() {
    let setup = Setup::new().await;
    let receiver = GatedReceiver::start();
    let (customer, tenant) = setup.customer("A").await;
    let (subscription, _) = setup
        .subscribe(customer, &receiver.url("prompt"), &["finding_critical"])
        .await;
    measured(&setup, customer, subscription, 9_000).await;
    setup
        .pass(customer, &[finding("c1", &tenant, "critical")])
        .await;
    let worker = patient_worker(&setup, "w1", 2, 1);
    assert_eq!(worker.drain().await.unwrap(), 1);
    #[derive(diesel::QueryableByName)]
    struct Latency {
        #[diesel(sql_type = diesel::sql_types::Integer)]
        latency_ms: i32,
    }
    let mut conn = setup.db.connection().await;
    let stored: Latency = diesel_async::RunQueryDsl::get_result(
        diesel::sql_query("SELECT latency_ms FROM webhook_latency"),
        &mut conn,
    )
    .await
    .unwrap();
    let attempt = setup
        .store
        .attempts(customer, setup.deliveries(customer).await[0].id);
    let latency = attempt.await.unwrap()[0].latency_ms;
    assert_eq!(
        stored.latency_ms as u32,
        posture_domain::fair_share::average_latency(Some(9_000), latency)
    );
}
