//! Customers with subscriptions, passes, receivers and workers for the delivery tests.

use std::{sync::Arc, time::Duration};

use posture_delivery::{Worker, WorkerConfig};
use posture_domain::{
    CustomerScope, WebhookId,
    delivery::{Delivery, DeliveryStatus, RetryPolicy},
    ports::DeliveryRepository,
    secrets::Keyring,
};
use posture_store_postgres::PgStore;
use posture_test_support::{TestDb, fixtures};
use serde_json::Value;
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

pub fn keyring() -> Arc<Keyring> {
    Arc::new(Keyring::new(&[9; 32], &[]).unwrap())
}

pub struct Setup {
    /// Keeps the test's database alive.
    pub db: TestDb,
    pub store: PgStore,
    pub keyring: Arc<Keyring>,
}

impl Setup {
    pub async fn new() -> Self {
        let db = TestDb::new().await;
        let store = db.store();
        Self {
            db,
            store,
            keyring: keyring(),
        }
    }

    /// A customer with one tenant and identity `u1` (whom the findings are about).
    pub async fn customer(&self, name: &str) -> (CustomerScope, String) {
        let (scope, tenant) = fixtures::customer_with_tenant(&self.store, name).await;
        self.pass(scope, &[fixtures::identity("u1", &tenant, "Ada")])
            .await;
        (scope, tenant)
    }

    pub async fn pass(
        &self,
        scope: CustomerScope,
        records: &[Value],
    ) -> posture_domain::ingest::PassSummary {
        fixtures::ingest(&self.store, scope, &fixtures::lines(records))
            .await
            .unwrap()
    }

    /// A subscription to `url` for these event types; returns its id and secret.
    pub async fn subscribe(
        &self,
        scope: CustomerScope,
        url: &str,
        event_types: &[&str],
    ) -> (WebhookId, String) {
        self.subscribe_as(scope, url, "generic", event_types).await
    }

    /// A receiver answering `status` to every POST, and a subscription of it for these event
    /// types: the receiver, the subscription's id and its secret.
    pub async fn subscribed(
        &self,
        scope: CustomerScope,
        status: u16,
        event_types: &[&str],
    ) -> (MockServer, WebhookId, String) {
        let server = receiver(status).await;
        let (id, secret) = self.subscribe(scope, &hook_url(&server), event_types).await;
        (server, id, secret)
    }

    pub async fn subscribe_as(
        &self,
        scope: CustomerScope,
        url: &str,
        kind: &str,
        event_types: &[&str],
    ) -> (WebhookId, String) {
        fixtures::subscription(&self.store, &self.keyring, scope, url, kind, event_types).await
    }

    /// The usual start of a delivery test: `url` subscribed to `finding_{severity}`, then a
    /// pass with one new finding of that severity (id: its first letter and 1), which
    /// queues one delivery. Returns the subscription's id.
    pub async fn one_delivery_to(
        &self,
        scope: CustomerScope,
        tenant: &str,
        url: &str,
        severity: &str,
    ) -> WebhookId {
        let (id, _) = self
            .subscribe(scope, url, &[&format!("finding_{severity}")])
            .await;
        let finding_id = format!("{}1", &severity[..1]);
        let summary = self
            .pass(scope, &[finding(&finding_id, tenant, severity)])
            .await;
        assert_eq!(summary.counts.deliveries, 1, "one delivery queued");
        id
    }

    pub fn worker(&self, allow_private: bool) -> Arc<Worker> {
        self.worker_with(allow_private, "w1")
    }

    pub fn worker_with(&self, allow_private: bool, id: &str) -> Arc<Worker> {
        self.worker_retrying(allow_private, id, Duration::from_millis(100))
    }

    /// A worker whose first retry comes a minute after a failure: a test that drains the
    /// queue sees each delivery attempted once, however long its drains take (on Citus a
    /// claim costs more round trips than on one node).
    pub fn worker_retrying_late(&self, allow_private: bool) -> Arc<Worker> {
        self.worker_retrying(allow_private, "w1", Duration::from_secs(60))
    }

    fn worker_retrying(&self, allow_private: bool, id: &str, base: Duration) -> Arc<Worker> {
        self.worker_of(WorkerConfig {
            allow_private,
            retry: RetryPolicy {
                base,
                max_attempts: 4,
            },
            ..worker_config(id)
        })
    }

    /// A worker whose clock stands an hour behind the database's: each retry it schedules
    /// (its clock's now plus the backoff) is due at once by the database's, so a test drains
    /// a delivery's attempts one after another instead of waiting out the backoff.
    pub fn worker_behind(&self, allow_private: bool) -> Arc<Worker> {
        let behind = chrono::Utc::now() - chrono::Duration::hours(1);
        self.worker_of(WorkerConfig {
            allow_private,
            clock: Arc::new(posture_domain::clock::ManualClock::at(behind)),
            ..worker_config("w1")
        })
    }

    /// Drains `worker` until `customer`'s first delivery has failed for good (at most
    /// `drains` times), and returns it.
    pub async fn drain_until_failed(
        &self,
        worker: &Arc<Worker>,
        customer: CustomerScope,
        drains: usize,
    ) -> Delivery {
        for _ in 0..drains {
            worker.drain().await.unwrap();
            let delivery = self.deliveries(customer).await.remove(0);
            if delivery.status == DeliveryStatus::Failed {
                return delivery;
            }
        }
        panic!("the delivery did not fail within {drains} drains");
    }

    /// A worker of this store and keyring, as `config` says.
    pub fn worker_of(&self, config: WorkerConfig) -> Arc<Worker> {
        let store = Arc::new(self.store.clone());
        Arc::new(Worker::new(store.clone(), store, self.keyring.clone(), config).unwrap())
    }

    pub async fn deliveries(&self, scope: CustomerScope) -> Vec<Delivery> {
        self.store
            .list_deliveries(scope, None, None, 10_000)
            .await
            .unwrap()
    }
}

/// The tests' worker settings: 8 prompt slots and 2 slow ones, a second's timeout, 4
/// attempts, private receivers allowed.
pub fn worker_config(id: &str) -> WorkerConfig {
    WorkerConfig {
        id: id.into(),
        concurrency: 8,
        slow_concurrency: 2,
        share: posture_domain::fair_share::FairShare::default(),
        lease: Duration::from_secs(5),
        poll_interval: Duration::from_millis(100),
        retry: RetryPolicy {
            base: Duration::from_millis(100),
            max_attempts: 4,
        },
        timeout: Duration::from_secs(1),
        allow_private: true,
        retention: chrono::Duration::days(30),
        disable_after: chrono::Duration::days(5),
        clock: posture_domain::clock::system(),
    }
}

/// A receiver answering `status` to every POST.
pub async fn receiver(status: u16) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(status))
        .mount(&server)
        .await;
    server
}

/// A receiver failing the first `n` POSTs with 500, then answering 200.
pub async fn failing_first(n: u64) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .up_to_n_times(n)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .with_priority(2)
        .mount(&server)
        .await;
    server
}

pub fn hook_url(server: &MockServer) -> String {
    format!("{}/hook", server.uri())
}

/// Critical, high and low findings of one pass.
pub fn finding(id: &str, tenant: &str, severity: &str) -> Value {
    fixtures::finding(id, tenant, severity, "open", "u1")
}

/// Runs the worker in the background until the returned sender is dropped or set.
pub fn run_in_background(worker: Arc<Worker>) -> tokio::sync::watch::Sender<bool> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move { worker.run(stopped).await });
    stop
}

/// Waits until `check` holds (up to 20 s).
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    posture_test_support::waits::wait_for(what, Duration::from_secs(20), || {
        let holds = check();
        async { holds.await.then_some(()) }
    })
    .await;
}
