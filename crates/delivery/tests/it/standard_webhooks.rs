//! Standard Webhooks signatures next to the seed's header: every attempt carries
//! `webhook-id`, `webhook-timestamp` and `webhook-signature`, which the official library
//! verifies unchanged, and which stop verifying once the attempt is old (a replay).

use chrono::Utc;
use posture_domain::signature::{verify, verify_standard};
use posture_test_support::standard_webhooks::{self, Received};
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

use crate::support::{Setup, eventually, hook_url, run_in_background};

fn header<'r>(request: &'r wiremock::Request, name: &str) -> &'r str {
    request
        .headers
        .get(name)
        .unwrap_or_else(|| panic!("{name} is missing"))
        .to_str()
        .unwrap()
}

fn received(request: &wiremock::Request) -> Received<'_> {
    Received {
        body: &request.body,
        headers: request
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect(),
    }
}

#[tokio::test]
async fn every_attempt_is_signed_both_ways_with_its_own_timestamp_and_the_same_webhook_id() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(204))
        .with_priority(2)
        .mount(&server)
        .await;
    let (_, secret) = setup
        .subscribe(customer, &hook_url(&server), &["finding_high"])
        .await;
    setup
        .pass(customer, &[crate::support::finding("h1", &tenant, "high")])
        .await;
    let before = Utc::now().timestamp();
    let _stop = run_in_background(setup.worker(true));
    eventually("the second attempt arrived", || async {
        server.received_requests().await.unwrap().len() == 2
    })
    .await;
    let after = Utc::now().timestamp();
    let requests = server.received_requests().await.unwrap();
    for request in &requests {
        let id = header(request, "webhook-id");
        assert_eq!(
            id,
            header(request, "x-service-delivery"),
            "one id, two names"
        );
        let timestamp: i64 = header(request, "webhook-timestamp").parse().unwrap();
        assert!(
            (before..=after).contains(&timestamp),
            "the attempt's own time: {timestamp} not in {before}..={after}"
        );
        let signature = header(request, "webhook-signature");
        assert!(
            signature.starts_with("v1,") && !signature.contains(' '),
            "{signature}"
        );
        assert!(verify_standard(
            &secret,
            id,
            timestamp,
            &request.body,
            signature
        ));
        assert!(
            verify(
                &secret,
                &request.body,
                header(request, "x-service-signature-256")
            ),
            "the seed's scheme is kept"
        );
    }
    assert_eq!(
        header(&requests[0], "webhook-id"),
        header(&requests[1], "webhook-id"),
        "a retry keeps its id, so receivers deduplicate it"
    );
}

#[tokio::test]
async fn the_official_standardwebhooks_library_verifies_a_delivery_and_rejects_its_replay() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let (server, _, secret) = setup.subscribed(customer, 200, &["finding_critical"]).await;
    let (_, other_secret) = setup
        .subscribe(customer, "http://127.0.0.1:9/unused", &["finding_low"])
        .await;
    setup
        .pass(
            customer,
            &[crate::support::finding("c1", &tenant, "critical")],
        )
        .await;
    assert_eq!(setup.worker(true).drain().await.unwrap(), 1);
    let requests = server.received_requests().await.unwrap();
    let delivery = received(&requests[0]);
    let mut tampered = received(&requests[0]);
    let body = [&requests[0].body[..], b" "].concat();
    tampered.body = &body;

    let results = standard_webhooks::verify(&[
        (&secret, &delivery, 0),
        // Replayed six minutes later: past the library's five-minute tolerance.
        (&secret, &delivery, 6 * 60),
        (&other_secret, &delivery, 0),
        (&secret, &tampered, 0),
    ]);
    assert_eq!(results[0], Ok(()), "verifies as sent");
    let replay = results[1].as_ref().unwrap_err();
    assert!(replay.contains("too old"), "{replay}");
    assert!(
        results[2]
            .as_ref()
            .unwrap_err()
            .contains("No matching signature")
    );
    assert!(
        results[3]
            .as_ref()
            .unwrap_err()
            .contains("No matching signature")
    );
}
