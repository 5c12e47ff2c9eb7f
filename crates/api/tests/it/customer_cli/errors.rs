//! What the CLI does with the answers that are not data: a 429 waited out as the service
//! says, 503s retried, a 500 reported with its request id, all said in words.

use std::{sync::Arc, time::Duration};

use posture_cli::{
    progress::Quiet,
    sync::{SyncOptions, sync},
    whoami,
};
use posture_domain::{clock::ManualClock, rate_limit::RatePolicy};
use posture_http::TrustedProxies;
use posture_rate_limit::InProcessRateLimiter;
use posture_test_support::{
    fixtures::{finding, identity},
    waits::wait_for,
};
use wiremock::{
    Mock, MockServer, ResponseTemplate,
    matchers::{method, path},
};

use super::{TempDb, cli, cli_at};
use crate::support::TestApp;

#[tokio::test]
async fn a_rate_limited_sync_waits_as_told_says_so_and_finishes() {
    let clock = Arc::new(ManualClock::starting_now());
    let held = clock.clone();
    let app = TestApp::with_limiter(
        move || {
            Arc::new(InProcessRateLimiter::new(
                RatePolicy {
                    limit: 4,
                    window_secs: 2,
                },
                held,
            ))
        },
        TrustedProxies::default(),
    )
    .await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let mut records = vec![identity("u1", &t, "Ada")];
    for i in 0..10 {
        records.push(finding(&format!("f{i}"), &t, "low", "open", "u1"));
    }
    app.ingest(customer, &records).await;
    let db = TempDb::new("limited");
    let (api, said) = cli(&app, &key);
    let options = SyncOptions {
        page_size: 2,
        ..SyncOptions::default()
    };
    // whoami, 5 pages of findings, identities, roles: 8 requests, 4 a window.
    let syncing = sync(&api, db.0.clone(), &Quiet, &options);
    let windows = async {
        let mut waits = 0;
        loop {
            // Each time the CLI says it waits, the window it waits for ends.
            waits = wait_for("the CLI to wait", Duration::from_secs(20), || async {
                let n = said
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|s| s.starts_with("rate limited"))
                    .count();
                (n > waits).then_some(n)
            })
            .await;
            clock.advance(Duration::from_secs(2));
        }
    };
    let report = tokio::select! {
        report = syncing => report.unwrap(),
        () = windows => unreachable!(),
    };
    assert_eq!(
        report.new_rows(),
        11,
        "every finding and the identity, despite the limit"
    );
    let said = said.lock().unwrap().clone();
    assert!(!said.is_empty(), "the limit was met");
    for line in &said {
        assert!(
            line.starts_with(
                "rate limited: the key's requests are used up until the window resets; waiting "
            ) && line.ends_with(" s as the service asks (Retry-After)"),
            "{line}"
        );
    }
}

#[tokio::test]
async fn unavailable_is_retried_and_a_failure_names_its_request_id() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    // A proxy in front of the service answering 503 twice, as a load balancer does while
    // the instances restart.
    let front = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&front)
        .await;
    let served = whoami::fetch(&cli(&app, &key).0).await.unwrap().raw;
    Mock::given(method("GET"))
        .and(path("/api/v1/keys/current"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({"data": served})))
        .with_priority(2)
        .mount(&front)
        .await;
    let (api, said) = cli_at(&front.uri(), &key);
    let me = whoami::fetch(&api).await.unwrap();
    assert_eq!(me.raw, served);
    let said = said.lock().unwrap().clone();
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(said[0].starts_with("posture is unavailable (503 Service Unavailable); retrying in"));
    assert!(said[1].ends_with("(attempt 2 of 4)"), "{said:?}");

    // Unavailable past the attempts: said, not retried forever.
    front.reset().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(503).insert_header("retry-after", "0"))
        .mount(&front)
        .await;
    let err = whoami::fetch(&api).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "posture is unavailable (503 Service Unavailable) after 4 attempts; run the command again later"
    );
    // A 500: the request id to quote, and the reason when there is one.
    front.reset().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(500)
                .insert_header("x-request-id", "req-42")
                .set_body_json(serde_json::json!({"error": "internal"})),
        )
        .mount(&front)
        .await;
    let err = whoami::fetch(&api).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "posture failed (500 Internal Server Error); quote request id req-42 when reporting it"
    );
    assert_eq!(
        front.received_requests().await.unwrap().len(),
        1,
        "a 500 is not retried"
    );
}

#[tokio::test]
async fn a_refusal_is_said_with_the_services_reason_as_the_docs_show() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let (api, _) = cli(&app, &key);
    // docs/cli.md: 400, 404 and other 4xx stop with the service's reason.
    for (path, query, said) in [
        (
            "findings/no-such-finding",
            vec![],
            "posture refused the request: finding not found",
        ),
        (
            "findings",
            vec![("severity", "urgent")],
            "posture refused the request: severity has an unknown value",
        ),
    ] {
        let err = api
            .get(path, &query, Default::default())
            .await
            .err()
            .unwrap();
        assert!(err.to_string().starts_with(said), "{path}: {err}");
    }
}
