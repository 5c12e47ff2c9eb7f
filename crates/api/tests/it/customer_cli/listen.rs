//! `posture listen --forward-to`: each event of the feed POSTed, in order, signed so that the
//! official Standard Webhooks library verifies it, and held while the receiver is down.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use posture_cli::{
    client::Retries,
    listen::{Forwarded, ListenOptions, listen, new_secret},
};
use posture_test_support::{
    fixtures::{finding, identity},
    standard_webhooks::{Received, verify},
    waits::wait_for,
};
use reqwest::StatusCode;
use serde_json::Value;

use super::cli;
use crate::support::TestApp;

type Requests = Arc<Mutex<Vec<(Vec<(String, String)>, Vec<u8>)>>>;

/// A receiver on `port` that keeps every request and answers 202.
fn receiver(port: u16, kept: Requests) -> actix_web::dev::Server {
    HttpServer::new(move || {
        let kept = kept.clone();
        App::new().route(
            "/hook",
            web::post().to(move |request: HttpRequest, body: web::Bytes| {
                let kept = kept.clone();
                async move {
                    let headers = request
                        .headers()
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
                        .collect();
                    kept.lock().unwrap().push((headers, body.to_vec()));
                    HttpResponse::Accepted().finish()
                }
            }),
        )
    })
    .workers(1)
    .bind(("127.0.0.1", port))
    .unwrap()
    .run()
}

#[tokio::test]
async fn events_are_forwarded_in_order_signed_and_held_while_the_receiver_is_down() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let (api, said) = cli(&app, &key);
    // A port where nothing listens yet.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let secret = new_secret().unwrap();
    let options = ListenOptions {
        forward_to: format!("http://127.0.0.1:{port}/hook").parse().unwrap(),
        types: vec!["finding_critical".into(), "finding_high".into()],
        secret: secret.clone(),
        after: None,
        since: None,
        receiver_retries: Retries {
            first_wait: Duration::from_millis(20),
            max_wait: Duration::from_millis(100),
            attempts: 1,
        },
    };
    let forwarded: Arc<Mutex<Vec<Forwarded>>> = Arc::default();
    let shown = forwarded.clone();
    let mut on_forwarded = move |f: &Forwarded| shown.lock().unwrap().push(f.clone());
    let kept: Requests = Arc::default();
    let scenario = async {
        app.ingest(
            customer,
            &[
                identity("u1", &t, "Ada"),
                finding("f1", &t, "critical", "open", "u1"),
                finding("f2", &t, "medium", "open", "u1"),
                finding("f3", &t, "high", "open", "u1"),
            ],
        )
        .await;
        wait_for(
            "the CLI to find the receiver down",
            Duration::from_secs(20),
            || async {
                let said = said.lock().unwrap();
                said.iter()
                    .any(|s| s.contains("is not answering"))
                    .then_some(())
            },
        )
        .await;
        let server = receiver(port, kept.clone());
        let handle = server.handle();
        tokio::spawn(server);
        wait_for("two events forwarded", Duration::from_secs(20), || async {
            (forwarded.lock().unwrap().len() >= 2).then_some(())
        })
        .await;
        handle.stop(true).await;
    };
    tokio::select! {
        ended = listen(&api, &options, &mut on_forwarded) => panic!("listen ended: {ended:?}"),
        () = scenario => {}
    }
    let forwarded = forwarded.lock().unwrap().clone();
    let kept = kept.lock().unwrap().clone();
    assert_eq!(
        kept.len(),
        2,
        "the medium finding's event is not of the types asked"
    );
    let types: Vec<&str> = forwarded.iter().map(|f| f.event_type.as_str()).collect();
    assert_eq!(
        types,
        ["finding_critical", "finding_high"],
        "the feed's order"
    );
    assert!(
        forwarded[0].attempts > 1,
        "held while the receiver was down"
    );
    assert!(forwarded.iter().all(|f| f.status == 202));
    // Each body is the event as the API serves it; the official library verifies each.
    for ((headers, body), f) in kept.iter().zip(&forwarded) {
        let served = app
            .get_json(&format!("/api/v1/events/{}", f.event), &key, StatusCode::OK)
            .await;
        assert_eq!(
            serde_json::from_slice::<Value>(body).unwrap(),
            served["data"]
        );
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(header("webhook-id"), Some(f.event.as_str()));
        assert_eq!(header("x-service-event"), Some(f.event_type.as_str()));
    }
    let received: Vec<Received<'_>> = kept
        .iter()
        .map(|(headers, body)| Received {
            body,
            headers: headers.clone(),
        })
        .collect();
    let cases: Vec<(&str, &Received<'_>, i64)> =
        received.iter().map(|r| (secret.as_str(), r, 0)).collect();
    assert_eq!(verify(&cases), [Ok(()), Ok(())]);
    let mut wrong = cases.clone();
    let other = new_secret().unwrap();
    wrong[0].0 = &other;
    assert!(
        verify(&wrong[..1])[0].is_err(),
        "another secret does not verify"
    );
}
