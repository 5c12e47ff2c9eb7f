//! The contract's examples are what the service answers: this test serves a
//! realistic customer (Contoso: identities, findings, a recommendation, risk scores, two
//! subscriptions, one of them failing, a key called `splunk-prod`), calls every operation
//! that answers JSON, receives a delivery of every event type at a real receiver, and
//! compares what it got with `crates/http/src/openapi/recorded.json`, from which the
//! contract's response and webhook examples are taken (`openapi/examples.rs`).
//!
//! What differs from one run to the next is written in a canonical form, so the file is the
//! same every run: ids (by order of first appearance, keeping their UUID version), times (by
//! rank, keeping their order and precision), days (by their distance from today), secrets,
//! key prefixes and cursors (fixed values of their real form and length), the receiver's
//! loopback address, latencies. A route that answers JSON and has no call here fails the
//! test, so a new route is recorded too.
//!
//! After changing what a route answers: `UPDATE_EXAMPLES=1 cargo xtask test --
//! recorded_examples`, then `cargo xtask openapi`.
mod canonical;
mod fixture;

use std::collections::BTreeMap;

use chrono::{Duration, Utc};
use posture_domain::{ScopeSet, api_key::NewApiKey, console::Actor, ports::ApiKeyRepository};
use posture_http::routes::ENDPOINTS;
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};
use wiremock::{Mock, MockServer, ResponseTemplate, matchers};

use self::{
    canonical::Canonical,
    fixture::{TENANT, passes},
};
use crate::{routes::webhook_ops::Ops, support::TestApp};

const RECORDED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../http/src/openapi/recorded.json"
);
/// Operations with no JSON success body to record.
/// Operations not recorded here: answers that are not JSON, and the audit feed, whose page
/// holds lines the server writes off the request path at moments a busy machine moves (its
/// example is its schema's; crates/api/tests/it/routes/audit.rs checks its answers).
const NOT_JSON: &[&str] = &[
    "exportFindings",
    "exportAuditEvents",
    "listAuditEvents",
    "deleteWebhook",
    "getOpenApi",
];

/// What the run recorded, in call order.
struct Recorder {
    ops: Ops,
    key: String,
    operations: Vec<(String, u16, Value)>,
}

impl Recorder {
    async fn call(
        &mut self,
        operation: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
        status: StatusCode,
    ) -> Value {
        let mut request = self
            .ops
            .app
            .client
            .request(method.clone(), self.ops.app.url(&format!("/api/v1{path}")))
            .bearer_auth(&self.key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), status, "{method} {path}");
        let body: Value = response.json().await.unwrap();
        self.operations
            .push((operation.to_owned(), status.as_u16(), body.clone()));
        body
    }
}

/// Contoso after its first pass, with a key holding every scope that has been used once
/// (its `lastUsedAt` is written off the request path: waited for, so it is always there).
async fn contoso(app: std::sync::Arc<TestApp>, first: &[Value]) -> Ops {
    let customer = posture_test_support::fixtures::customer(&app.store, "Contoso").await;
    app.ingest(customer, first).await;
    let (key, secret) = NewApiKey::generate(
        customer.customer_id(),
        "splunk-prod".into(),
        ScopeSet::all(),
        Some(Utc::now() + Duration::days(90)),
        Utc::now(),
    )
    .unwrap();
    app.store.insert_key(key, &Actor::Operator).await.unwrap();
    let ops = Ops::with_key(app, customer, TENANT, secret.expose());
    posture_test_support::waits::wait_for(
        "the key's lastUsedAt",
        std::time::Duration::from_secs(5),
        || async {
            let current = ops
                .json(Method::GET, "/keys/current", None, StatusCode::OK)
                .await;
            (!current["data"]["lastUsedAt"].is_null()).then_some(())
        },
    )
    .await;
    ops
}

/// A receiver that answers 503 on `/failing` and 200 elsewhere.
async fn receiver() -> MockServer {
    let receiver = MockServer::start().await;
    Mock::given(matchers::path("/failing"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&receiver)
        .await;
    Mock::given(matchers::method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&receiver)
        .await;
    receiver
}

impl Recorder {
    /// Every read route of the analysed data, the subscriptions and the failing one's log.
    async fn reads(&mut self, webhook: &str, failing: &str) {
        let paths = [
            ("listIdentities", "/identities?limit=2".to_owned()),
            ("getIdentity", format!("/identities/{}", fixture::ADA)),
            (
                "listFindings",
                "/findings?severity=critical,high&status=open&limit=2".to_owned(),
            ),
            ("getFinding", "/findings/f-7c1d9a".to_owned()),
            ("listRoleRecommendations", "/roles".to_owned()),
            ("getUprRollup", "/upr".to_owned()),
            ("listUprPrincipals", "/upr/principals?limit=2".to_owned()),
            ("getUprTrend", "/upr/trend?days=3".to_owned()),
            ("listTenants", "/tenants".to_owned()),
            ("listWebhooks", "/webhooks".to_owned()),
            ("getWebhook", format!("/webhooks/{webhook}")),
            (
                "listWebhookDeliveries",
                format!("/webhooks/{failing}/deliveries"),
            ),
        ];
        for (operation, path) in &paths {
            self.call(operation, Method::GET, path, None, StatusCode::OK)
                .await;
        }
        let failed = self.operations.last().unwrap().2["data"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let path = format!("/webhooks/{failing}/deliveries/{failed}");
        self.call(
            "getWebhookDelivery",
            Method::GET,
            &path,
            None,
            StatusCode::OK,
        )
        .await;
        let events = self
            .call(
                "listEvents",
                Method::GET,
                "/events?type=finding_critical,finding_resolved&limit=2",
                None,
                StatusCode::OK,
            )
            .await;
        let event = events["data"][1]["id"].as_str().unwrap().to_owned();
        let path = format!("/events/{event}");
        self.call("getEvent", Method::GET, &path, None, StatusCode::OK)
            .await;
    }

    /// What a consumer does to its subscriptions: redeliver, recover, test, rotate, edit.
    async fn operate(
        &mut self,
        webhook: &str,
        failing: &str,
        worker: &std::sync::Arc<posture_delivery::Worker>,
    ) {
        let delivered = self.ops.log(webhook).await;
        let delivered = delivered
            .iter()
            .find(|d| d["eventType"] == "finding_critical")
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let path = format!("/webhooks/{webhook}/deliveries/{delivered}/redeliver");
        self.call(
            "redeliverWebhookDelivery",
            Method::POST,
            &path,
            None,
            StatusCode::ACCEPTED,
        )
        .await;
        worker.drain().await.unwrap();
        let since = (Utc::now() - Duration::hours(1)).to_rfc3339();
        let calls = [
            (
                "recoverWebhookDeliveries",
                Method::POST,
                format!("/webhooks/{failing}/recover"),
                Some(json!({"since": since})),
                StatusCode::ACCEPTED,
            ),
            (
                "testWebhook",
                Method::POST,
                format!("/webhooks/{webhook}/test"),
                Some(json!({"eventType": "finding_critical"})),
                StatusCode::OK,
            ),
            (
                "rotateWebhookSecret",
                Method::POST,
                format!("/webhooks/{webhook}/rotate-secret"),
                Some(json!({})),
                StatusCode::OK,
            ),
            (
                "updateWebhook",
                Method::PATCH,
                format!("/webhooks/{webhook}"),
                Some(json!({"name": "SOC critical and high findings"})),
                StatusCode::OK,
            ),
            (
                "triageFinding",
                Method::PATCH,
                "/findings/f-7c1d9a".to_owned(),
                Some(json!({"triage": {
                    "state": "risk_accepted",
                    "reason": "compensating_control",
                    "comment": "Break-glass account, reviewed quarterly",
                    "expiresAt": (Utc::now() + Duration::days(90))
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                }})),
                StatusCode::OK,
            ),
            (
                "listFindingTriage",
                Method::GET,
                "/findings/f-7c1d9a/triage".to_owned(),
                None,
                StatusCode::OK,
            ),
            (
                "triageFindings",
                Method::POST,
                "/findings/triage".to_owned(),
                Some(json!({
                    "findings": [{"id": "f-6e1a04"}, {"id": "f-0000aa"}],
                    "triage": {"state": "acknowledged", "comment": "Tracked in INC-4711"},
                })),
                StatusCode::OK,
            ),
            (
                "getCurrentKey",
                Method::GET,
                "/keys/current".to_owned(),
                None,
                StatusCode::OK,
            ),
        ];
        for (operation, method, path, body, status) in calls {
            self.call(operation, method, &path, body, status).await;
        }
        // A ping, for the `ping` webhook's example (its answer is not recorded again).
        let ping = self
            .ops
            .call(Method::POST, &format!("/webhooks/{webhook}/test"), None)
            .await;
        assert_eq!(ping.status(), StatusCode::OK);
    }
}

/// One delivery of each event type, as the receiver got it at `/posture` (the first of
/// each; tests of an event type left out), and a ping.
async fn deliveries(receiver: &MockServer) -> BTreeMap<String, Value> {
    let mut webhooks = BTreeMap::new();
    for request in receiver.received_requests().await.unwrap() {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let event = request
            .headers
            .get("x-service-event")
            .unwrap()
            .to_str()
            .unwrap();
        // A test of an event type is left out (its event's real delivery is the example);
        // a ping is the `ping` webhook's.
        let sample = body["data"]["findings"][0]["test"] == true;
        if request.url.path() != "/posture" || (sample && event != "ping") {
            continue;
        }
        webhooks.entry(event.to_owned()).or_insert(body);
    }
    webhooks
}

/// The file's text: every operation's first answer and the deliveries, canonical.
fn recorded_file(
    operations: &[(String, u16, Value)],
    webhooks: &BTreeMap<String, Value>,
    mut canonical: Canonical,
) -> String {
    let mut first = Map::new();
    for (operation, status, body) in operations {
        canonical.note_times(body);
        first
            .entry(operation.clone())
            .or_insert(json!({"status": status, "body": body}));
    }
    for body in webhooks.values() {
        canonical.note_times(body);
    }
    let recorded = json!({
        "about": "Responses and deliveries posture made for the fixture of crates/api/tests/it/recorded_examples, in a canonical form; the contract's examples. Regenerate: UPDATE_EXAMPLES=1 cargo xtask test -- recorded_examples, then cargo xtask openapi.",
        "operations": canonical.rewrite("", &Value::Object(first)),
        "webhooks": canonical.rewrite("", &json!(webhooks)),
    });
    format!("{}\n", serde_json::to_string_pretty(&recorded).unwrap())
}

#[tokio::test]
async fn the_contracts_examples_are_what_the_service_answers() {
    let app = std::sync::Arc::new(TestApp::start().await);
    let today = Utc::now().date_naive();
    let [first, second, third] = passes(today);
    let ops = contoso(app.clone(), &first).await;
    let customer = ops.customer;
    let receiver = receiver().await;
    let key = ops.key.clone();
    let mut recorder = Recorder {
        ops,
        key,
        operations: Vec::new(),
    };
    let every_event = json!([
        "finding_critical",
        "finding_high",
        "finding_medium",
        "finding_low",
        "finding_resolved",
        "finding_reopened",
        "finding_severity_changed"
    ]);
    let body = json!({"name": "SOC critical findings",
                      "webhookUrl": format!("{}/posture", receiver.uri()),
                      "webhookType": "generic", "eventTypes": every_event});
    let created = recorder
        .call(
            "createWebhook",
            Method::POST,
            "/webhooks",
            Some(body),
            StatusCode::CREATED,
        )
        .await;
    let webhook = created["data"]["id"].as_str().unwrap().to_owned();
    let failing = format!("{}/failing", receiver.uri());
    let failing = recorder
        .ops
        .subscribe(&failing, "generic", &["finding_critical"])
        .await
        .0;
    // One attempt each: the failing receiver's delivery fails (and is recovered). Each
    // pass's deliveries are sent before the next pass (a delivery shows its findings as they
    // are when its chunk is first sent), one at a time, in the order they are claimed (the
    // times the examples show keep their order).
    let worker = recorder.ops.worker_with(1, 1);
    app.ingest(customer, &second).await;
    worker.drain().await.unwrap();
    app.ingest(customer, &third).await;
    worker.drain().await.unwrap();
    recorder.reads(&webhook, &failing).await;
    recorder.operate(&webhook, &failing, &worker).await;
    let webhooks = deliveries(&receiver).await;
    assert_eq!(webhooks.len(), 8, "{:?}", webhooks.keys());
    for endpoint in ENDPOINTS {
        let recorded = recorder
            .operations
            .iter()
            .any(|(o, _, _)| o == endpoint.operation_id);
        assert!(
            recorded || NOT_JSON.contains(&endpoint.operation_id),
            "{} has no recorded example: call it in recorded_examples",
            endpoint.operation_id
        );
    }

    let text = recorded_file(
        &recorder.operations,
        &webhooks,
        Canonical::new(receiver.uri(), today),
    );
    if std::env::var_os("UPDATE_EXAMPLES").is_some() {
        std::fs::write(RECORDED, &text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(RECORDED).unwrap_or_default();
    assert!(
        committed == text,
        "the recorded examples changed: run UPDATE_EXAMPLES=1 cargo xtask test -- \
         recorded_examples, then cargo xtask openapi\n{}",
        first_difference(&committed, &text)
    );
}

fn first_difference(committed: &str, recorded: &str) -> String {
    committed
        .lines()
        .zip(recorded.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .map_or_else(
            || "(one is a prefix of the other)".to_owned(),
            |(i, (a, b))| format!("line {}:\n  committed: {a}\n  recorded:  {b}", i + 1),
        )
}
