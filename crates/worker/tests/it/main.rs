//! posture-worker as a process: killed, stopped, woken.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use posture_domain::fair_share::ClaimRequest;
use std::{
    collections::HashSet,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use base64::Engine as _;
use posture_domain::{
    CustomerScope, delivery::DeliveryStatus, ports::DeliveryRepository, secrets::Keyring,
};
use posture_store_postgres::PgStore;
use posture_test_support::{
    TestDb, fixtures,
    waits::{wait_for, wait_for_port},
};
use serde_json::Value;
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

mod pgbouncer;

const KEY: [u8; 32] = [3; 32];

async fn customer_with_subscription(store: &PgStore, url: &str) -> (CustomerScope, String) {
    let (scope, tenant) = fixtures::customer_with_tenant(store, "A").await;
    fixtures::ingest(
        store,
        scope,
        &fixtures::lines(&[fixtures::identity("u1", &tenant, "Ada")]),
    )
    .await
    .unwrap();
    let keyring = Keyring::new(&KEY, &[]).unwrap();
    fixtures::subscription(
        store,
        &keyring,
        scope,
        url,
        "generic",
        &["finding_critical"],
    )
    .await;
    (scope, tenant)
}

/// A pass of `n` new critical findings: `ceil(n / 100)` deliveries.
async fn critical_findings(store: &PgStore, scope: CustomerScope, tenant: &str, n: usize) {
    let records: Vec<Value> = (0..n)
        .map(|i| fixtures::finding(&format!("c{i:05}"), tenant, "critical", "open", "u1"))
        .collect();
    fixtures::ingest(store, scope, &fixtures::lines(&records))
        .await
        .unwrap();
}

/// A worker process a test started: killed when the test ends, whether it passed or
/// panicked, so no worker outlives its test (and its database).
struct Running(Option<Child>);

impl Running {
    /// Waits for the worker to end by itself, and reads what it printed.
    fn wait_with_output(mut self) -> std::io::Result<std::process::Output> {
        self.0.take().expect("running").wait_with_output()
    }
}

impl std::ops::Deref for Running {
    type Target = Child;

    fn deref(&self) -> &Child {
        self.0.as_ref().expect("running")
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("running")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn worker(db: &TestDb, args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut command = Command::new(env!("CARGO_BIN_EXE_posture-worker"));
    command
        .args(args)
        .env("DATABASE_URL", db.runtime_url())
        .env(
            "POSTURE_SECRET_KEY",
            base64::engine::general_purpose::STANDARD.encode(KEY),
        )
        .env("POSTURE_WEBHOOK_ALLOW_PRIVATE", "true")
        .env("POSTURE_WEBHOOK_TIMEOUT_SECS", "1")
        .env("POSTURE_WORKER_LEASE_SECS", "2")
        .env("POSTURE_WORKER_CONCURRENCY", "4")
        .env("POSTURE_LOG", "warn")
        .stdout(Stdio::piped())
        .stdin(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    Running(Some(command.spawn().unwrap()))
}

/// Waits until a worker listens for passes on `db` (its LISTEN is its connection's last
/// statement): what a test queues after that can only reach it by notification or poll.
async fn listening(db: &TestDb) {
    wait_for("the worker's LISTEN", Duration::from_secs(10), || async {
        let listening = db
            .execute(
                "SELECT 1 FROM pg_stat_activity \
                 WHERE datname = current_database() AND query LIKE 'LISTEN %'",
            )
            .await;
        (listening > 0).then_some(())
    })
    .await;
}

async fn slow_receiver(delay: Duration) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_delay(delay))
        .mount(&server)
        .await;
    server
}

async fn wait_for_requests(server: &MockServer, n: usize) {
    let what = format!("the receiver getting {n} requests");
    wait_for(&what, Duration::from_secs(30), || async {
        (server.received_requests().await.unwrap().len() >= n).then_some(())
    })
    .await;
}

fn received_ids(requests: &[wiremock::Request]) -> HashSet<String> {
    requests
        .iter()
        .map(|r| {
            r.headers
                .get("x-service-delivery")
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn a_worker_killed_mid_batch_loses_nothing() {
    let db = TestDb::new().await;
    let store = db.store();
    let server = slow_receiver(Duration::from_millis(150)).await;
    let (scope, tenant) =
        customer_with_subscription(&store, &format!("{}/hook", server.uri())).await;
    critical_findings(&store, scope, &tenant, 6_000).await;
    let mut first = worker(&db, &[], &[]);
    wait_for_requests(&server, 8).await;
    first.kill().unwrap(); // SIGKILL: no chance to release its claims
    first.wait().unwrap();
    // Its leases (2 s, on the database's clock) are held until they run out: none has yet,
    // and ending them here stands for the wait; then another worker delivers the rest.
    let leased = expire_leases(&db).await;
    assert!(leased > 0, "the killed worker held leases");
    let second = worker(&db, &["--once", "--json"], &[])
        .wait_with_output()
        .unwrap();
    assert!(second.status.success());
    let summary: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
    let attempted = summary["attempted"].as_u64().unwrap();
    assert!(attempted > 0 && attempted <= 60, "{summary}");
    let deliveries = store
        .list_deliveries(scope, None, None, 1000)
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 60);
    assert!(
        deliveries
            .iter()
            .all(|d| d.status == DeliveryStatus::Delivered),
        "every delivery was delivered"
    );
    // Nothing is due any more; without --json, a line for people.
    let third = worker(&db, &["--once"], &[]).wait_with_output().unwrap();
    assert!(third.status.success());
    assert_eq!(
        String::from_utf8(third.stdout).unwrap(),
        "0 deliveries attempted\n"
    );
    let received = received_ids(&server.received_requests().await.unwrap());
    assert!(
        deliveries
            .iter()
            .all(|d| received.contains(&d.id.to_string())),
        "every delivery arrived"
    );
}

#[tokio::test]
async fn sigterm_finishes_in_flight_deliveries_and_leaves_nothing_claimed() {
    let db = TestDb::new().await;
    let store = db.store();
    let server = slow_receiver(Duration::from_millis(300)).await;
    let (scope, tenant) =
        customer_with_subscription(&store, &format!("{}/hook", server.uri())).await;
    critical_findings(&store, scope, &tenant, 5_000).await;
    let first = worker(&db, &[], &[]);
    wait_for_requests(&server, 4).await;
    Command::new("kill")
        .args(["-TERM", &first.id().to_string()])
        .status()
        .unwrap();
    let stopped = Instant::now();
    let output = first.wait_with_output().unwrap();
    assert!(output.status.success(), "a graceful stop exits 0");
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "in-flight attempts are bounded by the timeout"
    );
    // Nothing is left claimed (a worker claims only what it starts): another worker can take
    // every remaining delivery now, without waiting for leases to expire.
    let pending = store
        .list_deliveries(scope, None, Some(DeliveryStatus::Pending), 1000)
        .await
        .unwrap();
    assert!(!pending.is_empty(), "the worker stopped before the end");
    let claimed = store
        .claim_due(&ClaimRequest::unbounded(
            "other",
            1000,
            Duration::from_secs(60),
        ))
        .await
        .unwrap();
    assert_eq!(claimed.len(), pending.len());
}

#[tokio::test]
async fn a_new_pass_wakes_an_idle_worker_through_listen_notify() {
    let db = TestDb::new().await;
    let store = db.store();
    let server = slow_receiver(Duration::ZERO).await;
    let (scope, tenant) =
        customer_with_subscription(&store, &format!("{}/hook", server.uri())).await;
    // A poll interval far longer than the test: only a notification can wake it.
    let mut idle = worker(&db, &[], &[("POSTURE_WORKER_POLL_SECS", "300")]);
    listening(&db).await;
    let queued = Instant::now();
    critical_findings(&store, scope, &tenant, 10).await;
    wait_for_requests(&server, 1).await;
    assert!(
        queued.elapsed() < Duration::from_secs(5),
        "woken by NOTIFY, not by polling"
    );
    idle.kill().unwrap();
    idle.wait().unwrap();
}

#[tokio::test]
async fn the_worker_exposes_delivery_outcomes_and_queue_depth() {
    let db = TestDb::new().await;
    let store = db.store();
    let server = slow_receiver(Duration::ZERO).await;
    let (scope, tenant) =
        customer_with_subscription(&store, &format!("{}/hook", server.uri())).await;
    critical_findings(&store, scope, &tenant, 150).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bind = format!("127.0.0.1:{port}");
    let mut running = worker(&db, &[], &[("POSTURE_METRICS_BIND", bind.as_str())]);
    wait_for_requests(&server, 2).await;
    wait_for_port("the worker's metrics", port, Duration::from_secs(20));
    let delivered = "posture_webhook_attempts_total{outcome=\"delivered\",receiver=\"generic\"} 2";
    let text = wait_for(
        "metrics showing the deliveries",
        Duration::from_secs(20),
        || async {
            let text = fetch(&format!("http://{bind}/metrics")).await;
            text.contains(delivered).then_some(text)
        },
    )
    .await;
    assert!(
        text.contains("posture_webhook_queue_depth{state=\"pending\"}"),
        "{text}"
    );
    assert!(
        text.contains("posture_webhook_queue_oldest_due_seconds "),
        "{text}"
    );
    assert!(
        text.contains("posture_webhook_attempt_duration_seconds_bucket"),
        "{text}"
    );
    // The analyzer's passes of the last hour (posture-api ingest exports nothing itself).
    let passes = db
        .row_counts()
        .await
        .into_iter()
        .find(|(table, _)| *table == "analyzer_passes")
        .unwrap()
        .1;
    assert!(
        text.contains(&format!("posture_ingest_passes_last_hour {passes}\n")),
        "{passes} passes:\n{text}"
    );
    for quantile in ["0.5", "0.99", "1"] {
        assert!(
            text.contains(&format!(
                "posture_ingest_pass_duration_seconds{{quantile=\"{quantile}\"}} "
            )),
            "{text}"
        );
    }
    assert!(
        text.contains("posture_ingest_last_pass_age_seconds "),
        "{text}"
    );
    running.kill().unwrap();
    running.wait().unwrap();
}

async fn fetch(url: &str) -> String {
    let output = tokio::process::Command::new("curl")
        .args(["-s", url])
        .output()
        .await
        .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Moves every lease of the database's deliveries into the past (what waiting for them to
/// run out would do); returns how many there were.
async fn expire_leases(db: &TestDb) -> usize {
    db.execute(
        "UPDATE webhook_deliveries SET lease_until = now() - interval '1 second' \
         WHERE lease_until > now()",
    )
    .await
}
