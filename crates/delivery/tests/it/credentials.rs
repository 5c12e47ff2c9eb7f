//! A receiver's URL is a credential (Slack's and Teams' webhook URLs authorise by their
//! path): no failed attempt records it, and no log line shows it.

use std::time::Duration;

use posture_domain::ports::DeliveryRepository;
use posture_test_support::logs;
use tokio::{io::AsyncWriteExt as _, net::TcpListener};
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

use crate::support::Setup;

/// The secret part of every URL below.
const TOKEN: &str = "T0001/B0002/s3cr3tT0k3nXYZ";

/// A receiver that answers garbage instead of HTTP, then hangs up.
async fn garbage_receiver() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.write_all(b"HELLO THERE\r\n\r\n").await;
        }
    });
    format!("http://{addr}/services/{TOKEN}")
}

/// A port nothing listens on.
fn closed_receiver() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}/services/{TOKEN}")
}

/// A receiver slower than the worker's timeout.
async fn slow_receiver() -> (MockServer, String) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let url = format!("{}/services/{TOKEN}", server.uri());
    (server, url)
}

#[tokio::test]
async fn failed_attempts_record_why_but_never_the_url() {
    logs::capture();
    let setup = Setup::new().await;
    let (_slow, slow) = slow_receiver().await;
    let urls = [garbage_receiver().await, closed_receiver(), slow];
    let mut errors = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        let (customer, tenant) = setup.customer(&format!("C{i}")).await;
        setup.one_delivery_to(customer, &tenant, url, "high").await;
        assert!(setup.worker(true).drain().await.unwrap() >= 1);
        let delivery = &setup.deliveries(customer).await[0];
        let attempts = setup.store.attempts(customer, delivery.id).await.unwrap();
        let error = attempts[0].error.clone().unwrap_or_default();
        assert!(!error.is_empty(), "{url}: the attempt says why it failed");
        errors.push(error);
        errors.push(delivery.last_error.clone().unwrap_or_default());
    }
    for error in &errors {
        assert!(
            !error.contains("s3cr3t"),
            "a URL reached the record: {error}"
        );
    }
    let logged = logs::captured();
    assert!(
        logged.contains("webhook attempt"),
        "logs are being captured"
    );
    assert!(!logged.contains("s3cr3t"), "a URL reached the logs");
    eprintln!("{errors:#?}");
}
