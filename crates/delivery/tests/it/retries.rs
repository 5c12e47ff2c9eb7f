//! Outcomes of attempts: retries with the same delivery id and bytes, 410, timeouts,
//! exhaustion, Retry-After, redirects.

use posture_domain::fair_share::ClaimRequest;
use std::time::Duration;

use chrono::Utc;
use posture_domain::{
    delivery::DeliveryStatus,
    ports::{DeliveryRepository, WebhookRepository},
};
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

use crate::support::{
    Setup, eventually, failing_first, finding, hook_url, receiver, run_in_background,
};

#[tokio::test]
async fn a_receiver_failing_twice_gets_the_same_delivery_on_the_third_attempt() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let server = failing_first(2).await;
    setup
        .one_delivery_to(customer, &tenant, &hook_url(&server), "critical")
        .await;
    let _stop = run_in_background(setup.worker(true));
    eventually("the third attempt succeeded", || async {
        setup.deliveries(customer).await[0].status == DeliveryStatus::Delivered
    })
    .await;
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 3);
    let ids: Vec<_> = requests
        .iter()
        .map(|r| r.headers.get("x-service-delivery").unwrap().clone())
        .collect();
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "X-Service-Delivery is stable across retries"
    );
    assert!(
        requests.iter().all(|r| r.body == requests[0].body),
        "every attempt sends the same bytes"
    );
    let delivery = &setup.deliveries(customer).await[0];
    assert_eq!(delivery.attempts, 3);
    let attempts = setup.store.attempts(customer, delivery.id).await.unwrap();
    let statuses: Vec<_> = attempts.iter().map(|a| a.status_code).collect();
    assert_eq!(statuses, vec![Some(500), Some(500), Some(200)]);
    assert_eq!(
        attempts.iter().map(|a| a.number).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
}

#[tokio::test]
async fn gone_deactivates_the_subscription() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let (server, id, _) = setup
        .subscribed(customer, 410, &["finding_critical", "finding_high"])
        .await;
    setup
        .pass(
            customer,
            &[
                finding("c1", &tenant, "critical"),
                finding("h1", &tenant, "high"),
            ],
        )
        .await;
    let worker = setup.worker_with(true, "w1");
    // One delivery answered 410; the other must not be sent afterwards.
    let claimed = setup
        .store
        .claim_due(&ClaimRequest::unbounded("w1", 1, Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    worker
        .deliver(claimed.into_iter().next().unwrap())
        .await
        .unwrap();
    assert!(
        setup.store.get_subscription(customer, id).await.is_err(),
        "deactivated"
    );
    assert_eq!(worker.drain().await.unwrap(), 0);
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    let statuses: Vec<_> = setup
        .deliveries(customer)
        .await
        .iter()
        .map(|d| d.status)
        .collect();
    assert!(
        statuses.contains(&DeliveryStatus::Failed) && statuses.contains(&DeliveryStatus::Cancelled),
        "{statuses:?}"
    );
    assert_eq!(
        setup.db.assert_delivery_totals().await,
        statuses.len() as i64
    );
}

#[tokio::test]
async fn a_receiver_that_never_answers_is_recorded_as_a_timeout_and_retried() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    setup
        .one_delivery_to(customer, &tenant, &hook_url(&server), "low")
        .await;
    let started = Utc::now();
    assert_eq!(setup.worker_retrying_late(true).drain().await.unwrap(), 1);
    let delivery = &setup.deliveries(customer).await[0];
    assert_eq!(delivery.status, DeliveryStatus::Pending, "to be retried");
    assert_eq!(delivery.attempts, 1);
    assert!(delivery.next_attempt_at > started);
    let attempts = setup.store.attempts(customer, delivery.id).await.unwrap();
    assert_eq!(attempts[0].status_code, None);
    assert!(
        attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("no answer within 1 s"),
        "{:?}",
        attempts[0].error
    );
    assert!(attempts[0].latency_ms >= 900);
}

#[tokio::test]
async fn a_delivery_failing_every_attempt_ends_failed() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let server = receiver(503).await;
    setup
        .one_delivery_to(customer, &tenant, &hook_url(&server), "medium")
        .await;
    let _stop = run_in_background(setup.worker(true));
    eventually("the delivery failed", || async {
        setup.deliveries(customer).await[0].status == DeliveryStatus::Failed
    })
    .await;
    let delivery = &setup.deliveries(customer).await[0];
    assert_eq!(delivery.attempts, 4, "max_attempts of the test policy");
    assert_eq!(delivery.last_error.as_deref(), Some("HTTP 503"));
    assert_eq!(server.received_requests().await.unwrap().len(), 4);
}

#[tokio::test]
async fn retry_after_postpones_the_next_attempt() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("Retry-After", "30"))
        .mount(&server)
        .await;
    setup
        .one_delivery_to(customer, &tenant, &hook_url(&server), "high")
        .await;
    let before = Utc::now();
    setup.worker(true).drain().await.unwrap();
    let delivery = &setup.deliveries(customer).await[0];
    assert!(
        delivery.next_attempt_at >= before + chrono::Duration::seconds(29),
        "{} vs {before}",
        delivery.next_attempt_at
    );
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let target = receiver(200).await;
    let redirecting = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(307).insert_header("Location", hook_url(&target)))
        .mount(&redirecting)
        .await;
    setup
        .one_delivery_to(customer, &tenant, &hook_url(&redirecting), "high")
        .await;
    setup.worker_retrying_late(true).drain().await.unwrap();
    assert!(
        target.received_requests().await.unwrap().is_empty(),
        "the redirect target is never called"
    );
    let delivery = &setup.deliveries(customer).await[0];
    assert_eq!(delivery.status, DeliveryStatus::Pending);
    assert!(
        delivery
            .last_error
            .as_deref()
            .unwrap()
            .contains("redirects are not followed")
    );
}

#[tokio::test]
async fn the_response_excerpt_is_kept_to_1_kib() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("x".repeat(5000)))
        .mount(&server)
        .await;
    setup
        .one_delivery_to(customer, &tenant, &hook_url(&server), "high")
        .await;
    setup.worker_retrying_late(true).drain().await.unwrap();
    let delivery = &setup.deliveries(customer).await[0];
    let attempts = setup.store.attempts(customer, delivery.id).await.unwrap();
    assert_eq!(
        attempts[0].response_excerpt.as_deref().map(str::len),
        Some(1024)
    );
}
