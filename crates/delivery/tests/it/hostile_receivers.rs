//! What a receiver answers is outside text: whatever it sends — a NUL byte,
//! escape sequences, invalid UTF-8, a huge body — each attempt is recorded and counted, so
//! the retry policy and its cap apply; and what a customer reads of a failure is coarse: an
//! unreachable receiver reads the same whether its port is closed or its name only resolves
//! inside the network.

use posture_domain::{delivery::DeliveryStatus, ports::DeliveryRepository};
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

use crate::support::{Setup, hook_url};

/// A receiver answering `status` with `body`.
async fn answering(status: u16, body: Vec<u8>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(status).set_body_bytes(body))
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn every_answer_of_a_receiver_is_recorded_as_a_counted_attempt() {
    let hostile: Vec<Vec<u8>> = vec![
        b"bad\x00byte".to_vec(),
        b"\x1b[2J\x1b]0;owned\x07 line\r\nINFO forged".to_vec(),
        vec![0xff, 0xfe, 0x00, 0xc3, 0x28],
        "é".repeat(3000).into_bytes(),
    ];
    for body in hostile {
        let setup = Setup::new().await;
        let (customer, tenant) = setup.customer("A").await;
        let server = answering(500, body.clone()).await;
        setup
            .one_delivery_to(customer, &tenant, &hook_url(&server), "high")
            .await;
        // Three drains, the first one due: one POST, one counted attempt (it was one POST
        // per lease expiry, attempts unchanged, while the record failed on the NUL).
        for _ in 0..3 {
            setup.worker_retrying_late(true).drain().await.unwrap();
        }
        assert_eq!(
            server.received_requests().await.unwrap().len(),
            1,
            "{body:?}"
        );
        let delivery = &setup.deliveries(customer).await[0];
        assert_eq!(delivery.attempts, 1, "{body:?}");
        assert_eq!(
            delivery.status,
            DeliveryStatus::Pending,
            "a retry is due later"
        );
        let attempts = setup.store.attempts(customer, delivery.id).await.unwrap();
        let excerpt = attempts[0].response_excerpt.clone().unwrap();
        assert!(
            !excerpt.contains('\0') && !excerpt.contains('\u{1b}'),
            "{excerpt:?}"
        );
        assert!(excerpt.len() <= 1024, "{}", excerpt.len());
        assert_eq!(attempts[0].error.as_deref(), Some("HTTP 500"));
    }
}

#[tokio::test]
async fn the_attempt_cap_applies_to_a_receiver_answering_nul_bytes() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let server = answering(503, b"bad\x00byte".to_vec()).await;
    setup
        .one_delivery_to(customer, &tenant, &hook_url(&server), "high")
        .await;
    // The policy's four attempts, each due at once on the worker's clock: each is sent once.
    let worker = setup.worker_behind(true);
    let delivery = setup.drain_until_failed(&worker, customer, 8).await;
    assert_eq!(delivery.attempts, 4);
    assert_eq!(server.received_requests().await.unwrap().len(), 4);
}

#[tokio::test]
async fn a_closed_port_and_a_name_that_does_not_resolve_read_alike_to_the_customer() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    // A port nobody listens on, and a name no resolver knows.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        format!("http://127.0.0.1:{port}/hook")
    };
    for (url, severity) in [
        (closed.as_str(), "high"),
        ("http://no-such-host.invalid/hook", "low"),
    ] {
        setup
            .one_delivery_to(customer, &tenant, url, severity)
            .await;
    }
    setup.worker_retrying_late(true).drain().await.unwrap();
    let deliveries = setup.deliveries(customer).await;
    assert_eq!(deliveries.len(), 2);
    let mut details = Vec::new();
    for delivery in &deliveries {
        assert_eq!(
            delivery.last_error.as_deref(),
            Some(posture_delivery::UNREACHABLE),
            "the customer's log says no more"
        );
        let attempts = setup.store.attempts(customer, delivery.id).await.unwrap();
        details.push(attempts[0].detail.clone().unwrap());
    }
    // Operators still see what the network said.
    details.sort();
    assert_ne!(details[0], details[1], "{details:?}");
}
