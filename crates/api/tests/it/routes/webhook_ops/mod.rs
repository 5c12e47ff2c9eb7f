//! Webhook operations for consumers (docs/webhooks.md, "Operating a subscription"): the
//! delivery log, redelivery, recovery after an outage and test deliveries, against real
//! receivers on loopback and a real worker.

mod edit;
mod events_feed;
mod log;
mod recovery;
mod rotation;
mod test_delivery;

use std::{sync::Arc, time::Duration};

use posture_delivery::{Worker, WorkerConfig};
use posture_domain::{CustomerScope, Scope, delivery::RetryPolicy};
use posture_test_support::fixtures;
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

use crate::support::{TestApp, test_keyring};

/// A customer with a `manage:webhooks` key, and what its tests do through the API.
pub struct Ops {
    pub app: Arc<TestApp>,
    pub customer: CustomerScope,
    pub tenant: String,
    pub key: String,
    /// Every finding reported so far (each pass reports them all, plus the new ones).
    reported: std::sync::Mutex<Vec<Value>>,
}

impl Ops {
    pub async fn new() -> Self {
        Self::on(Arc::new(TestApp::start().await), "A").await
    }

    /// Another customer on the same server.
    pub async fn sibling(&self, name: &str) -> Self {
        Self::on(self.app.clone(), name).await
    }

    pub async fn on(app: Arc<TestApp>, name: &str) -> Self {
        let (customer, tenant) = app.customer(name).await;
        // Redeliveries and recoveries take read:findings too.
        let (_, key) = app
            .key(customer, &[Scope::ManageWebhooks, Scope::ReadFindings])
            .await;
        Self {
            app,
            customer,
            tenant,
            key,
            reported: std::sync::Mutex::default(),
        }
    }

    /// A customer of `app` seen through a key of its own (any scopes it holds).
    pub fn with_key(app: Arc<TestApp>, customer: CustomerScope, tenant: &str, key: &str) -> Self {
        Self {
            app,
            customer,
            tenant: tenant.to_owned(),
            key: key.to_owned(),
            reported: std::sync::Mutex::default(),
        }
    }

    /// Subscribes `url`; returns the subscription's id and signing secret.
    pub async fn subscribe(&self, url: &str, kind: &str, events: &[&str]) -> (String, String) {
        let created = self
            .json(
                Method::POST,
                "/webhooks",
                Some(
                    json!({"name": "ops", "webhookUrl": url, "webhookType": kind,
                            "eventTypes": events}),
                ),
                StatusCode::CREATED,
            )
            .await;
        (
            created["data"]["id"].as_str().unwrap().to_owned(),
            created["data"]["signingSecret"]
                .as_str()
                .unwrap()
                .to_owned(),
        )
    }

    /// A pass reporting new findings `(id, severity)` besides the earlier ones.
    pub async fn pass(&self, new: &[(&str, &str)]) {
        let records = {
            let mut reported = self.reported.lock().unwrap();
            for (id, severity) in new {
                reported.push(fixtures::finding(id, &self.tenant, severity, "open", "u1"));
            }
            let mut records = vec![fixtures::identity("u1", &self.tenant, "Ada")];
            records.extend(reported.iter().cloned());
            records
        };
        self.app.ingest(self.customer, &records).await;
    }

    /// A worker trying each delivery `max_attempts` times (100 ms apart at first).
    pub fn worker(&self, max_attempts: u32) -> Arc<Worker> {
        self.worker_with(max_attempts, 4)
    }

    /// A worker sending `concurrency` deliveries at once (1: in the order it claims them).
    pub fn worker_with(&self, max_attempts: u32, concurrency: usize) -> Arc<Worker> {
        let store = Arc::new(self.app.store.clone());
        Arc::new(
            Worker::new(
                store.clone(),
                store,
                Arc::new(test_keyring()),
                WorkerConfig {
                    id: "ops-test".into(),
                    concurrency,
                    slow_concurrency: 1,
                    share: posture_domain::fair_share::FairShare::default(),
                    lease: Duration::from_secs(5),
                    poll_interval: Duration::from_millis(100),
                    // A failed delivery's retry is a minute away: a drain attempts each
                    // delivery once, however long it takes (on Citus, under load).
                    retry: RetryPolicy {
                        base: Duration::from_secs(60),
                        max_attempts,
                    },
                    timeout: Duration::from_secs(2),
                    allow_private: true,
                    retention: chrono::Duration::days(30),
                    disable_after: chrono::Duration::days(5),
                    clock: posture_domain::clock::system(),
                },
            )
            .unwrap(),
        )
    }

    /// A request to `/api/v1{path}` with the key.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Response {
        let mut request = self
            .app
            .client
            .request(method, self.app.url(&format!("/api/v1{path}")))
            .bearer_auth(&self.key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.unwrap()
    }

    /// A request expecting `status`; returns its JSON body.
    pub async fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        status: StatusCode,
    ) -> Value {
        let response = self.call(method.clone(), path, body).await;
        assert_eq!(response.status(), status, "{method} {path}");
        response.json().await.unwrap()
    }

    /// The subscription's delivery log (first page, up to 500).
    pub async fn log(&self, webhook: &str) -> Vec<Value> {
        let page = self
            .json(
                Method::GET,
                &format!("/webhooks/{webhook}/deliveries?limit=500"),
                None,
                StatusCode::OK,
            )
            .await;
        page["data"].as_array().unwrap().clone()
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

pub fn hook(server: &MockServer) -> String {
    format!("{}/hook", server.uri())
}

/// A header of a received request.
pub fn header<'r>(request: &'r wiremock::Request, name: &str) -> &'r str {
    request
        .headers
        .get(name)
        .unwrap_or_else(|| panic!("{name} is missing"))
        .to_str()
        .unwrap()
}
