//! The SSRF guard at delivery time.

use posture_domain::ports::DeliveryRepository;

use crate::support::{Setup, finding, receiver};

#[tokio::test]
async fn a_url_resolving_to_loopback_is_refused_when_private_targets_are_not_allowed() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let server = receiver(200).await;
    let port = server.address().port();
    // `localhost` is a name, not a literal: the resolver is what refuses it.
    setup
        .subscribe(
            customer,
            &format!("https://localhost:{port}/hook"),
            &["finding_critical"],
        )
        .await;
    setup
        .pass(customer, &[finding("c1", &tenant, "critical")])
        .await;
    assert_eq!(setup.worker_retrying_late(false).drain().await.unwrap(), 1);
    assert!(
        server.received_requests().await.unwrap().is_empty(),
        "nothing reached the loopback receiver"
    );
    let delivery = &setup.deliveries(customer).await[0];
    let attempts = setup.store.attempts(customer, delivery.id).await.unwrap();
    // The customer reads a coarse outcome; the operator's detail says why.
    assert_eq!(
        attempts[0].error.as_deref(),
        Some(posture_delivery::UNREACHABLE)
    );
    let detail = attempts[0].detail.as_deref().unwrap();
    assert!(
        detail.contains("localhost") && detail.contains("may not connect to"),
        "{detail}"
    );
}

#[tokio::test]
async fn literal_private_addresses_and_plain_http_are_refused() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let server = receiver(200).await;
    let port = server.address().port();
    setup
        .subscribe(
            customer,
            &format!("https://127.0.0.1:{port}/hook"),
            &["finding_critical"],
        )
        .await;
    setup
        .subscribe(
            customer,
            &format!("http://127.0.0.1:{port}/hook"),
            &["finding_critical"],
        )
        .await;
    setup
        .pass(customer, &[finding("c1", &tenant, "critical")])
        .await;
    assert_eq!(setup.worker_retrying_late(false).drain().await.unwrap(), 2);
    assert!(server.received_requests().await.unwrap().is_empty());
    for delivery in setup.deliveries(customer).await {
        let attempts = setup.store.attempts(customer, delivery.id).await.unwrap();
        assert!(
            attempts[0].error.as_deref().unwrap().starts_with("refused"),
            "{:?}",
            attempts[0].error
        );
    }
}
