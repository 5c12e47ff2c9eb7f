//! The contract test: every operation of the route table, called for real, answers as the
//! OpenAPI document says — a documented status, the documented headers, a body valid against
//! the documented schema. The probes are derived from the document (`probes.rs`), so a new
//! route is probed as soon as it is declared.

mod probes;

use std::sync::{Arc, LazyLock};

use posture_domain::{Scope, rate_limit::RatePolicy};
use posture_http::{
    TrustedProxies, openapi,
    routes::{Access, ENDPOINTS},
};
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::support::TestApp;
use probes::{Fixtures, Sent, probes};

/// The document as served, examples included.
static DOCUMENT: LazyLock<Value> =
    LazyLock::new(|| serde_json::from_str(&openapi::render()).unwrap());

/// Follows a local `$ref` within the document.
fn resolve(value: &Value) -> &Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let pointer = reference.strip_prefix('#').unwrap();
            resolve(
                DOCUMENT
                    .pointer(pointer)
                    .unwrap_or_else(|| panic!("dangling $ref {reference}")),
            )
        }
        None => value,
    }
}

/// A validator for `schema`, whose `$ref`s point into the document's components.
fn validator(schema: &Value) -> jsonschema::Validator {
    let mut root = schema.clone();
    root.as_object_mut()
        .unwrap()
        .insert("components".to_owned(), DOCUMENT["components"].clone());
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&root)
        .unwrap()
}

fn assert_valid(schema: &Value, instance: &Value, what: &str) {
    let validator = validator(schema);
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:?}\n{instance}");
}

/// Checks one response against the operation `(method, template)` of the document.
async fn check(method: &str, template: &str, response: Response) -> (StatusCode, Vec<u8>) {
    let status = response.status();
    let operation = &DOCUMENT["paths"][template][method.to_lowercase()];
    assert!(
        operation.is_object(),
        "{method} {template} is not in the document"
    );
    let documented = &operation["responses"][status.as_str()];
    assert!(
        documented.is_object(),
        "{method} {template}: status {status} is not documented"
    );
    let documented = resolve(documented);
    let headers = response.headers().clone();
    for (name, spec) in documented["headers"].as_object().into_iter().flatten() {
        let spec = resolve(spec);
        let value = headers.get(name.as_str());
        if spec["required"] == true {
            assert!(
                value.is_some(),
                "{method} {template} {status}: header {name} is missing"
            );
        }
        if let Some(value) = value {
            let text = value.to_str().unwrap();
            let instance = match spec["schema"]["type"].as_str() {
                Some("integer") => json!(
                    text.parse::<i64>()
                        .unwrap_or_else(|_| panic!("{name}: {text} is not an integer"))
                ),
                _ => json!(text),
            };
            assert_valid(
                &spec["schema"],
                &instance,
                &format!("{method} {template} {status} header {name}"),
            );
        }
    }
    let content_type = headers
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.bytes().await.unwrap().to_vec();
    match (documented["content"].as_object(), content_type) {
        (None, _) => assert!(
            body.is_empty(),
            "{method} {template} {status}: undocumented body"
        ),
        (Some(content), Some(content_type)) => {
            let media = content.get(&content_type).unwrap_or_else(|| {
                panic!("{method} {template} {status}: {content_type} is not documented")
            });
            let schema = &media["schema"];
            if content_type == "application/x-ndjson" {
                for line in String::from_utf8(body.clone()).unwrap().lines() {
                    assert_valid(
                        schema,
                        &serde_json::from_str(line).unwrap(),
                        &format!("{method} {template} line"),
                    );
                }
            } else if content_type.starts_with("application/json") {
                assert_valid(
                    schema,
                    &serde_json::from_slice(&body).unwrap(),
                    &format!("{method} {template} {status}"),
                );
            } else {
                assert_valid(
                    schema,
                    &json!(String::from_utf8(body.clone()).unwrap()),
                    &format!("{method} {template} {status}"),
                );
            }
        }
        (Some(_), None) => panic!("{method} {template} {status}: no content type"),
    }
    (status, body)
}

#[tokio::test]
async fn every_operation_answers_as_the_contract_says() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer_with_one_of_each("A").await;
    let key = app.key_with_every_scope(customer).await;
    let (_, no_scope) = app.key(customer, &[Scope::ProvisionScim]).await;
    let created: Value = app
        .client
        .post(app.url("/api/v1/webhooks"))
        .bearer_auth(&key)
        .json(&json!({"name": "w", "webhookUrl": "https://hooks.example.com/w", "webhookType": "generic", "eventTypes": ["finding_high"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let webhook = created["data"]["id"].as_str().unwrap().to_owned();
    // A delivery to read and redeliver: a test (the receiver's name does not resolve here,
    // so it fails, and can be sent again).
    let tested: Value = app
        .client
        .post(app.url(&format!("/api/v1/webhooks/{webhook}/test")))
        .bearer_auth(&key)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let delivery = tested["data"]["deliveryId"].as_str().unwrap().to_owned();

    // An event to read: f1's, of the customer's one pass.
    let events: Value = app
        .client
        .get(app.url("/api/v1/events"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let event = events["data"][0]["id"].as_str().unwrap().to_owned();

    let fixtures = Fixtures {
        identity: "u1".to_owned(),
        finding: "f1".to_owned(),
        webhook: webhook.clone(),
        delivery,
        event,
        tenant,
    };

    let mut checked = 0;
    for endpoint in ENDPOINTS {
        let template = endpoint.full_path();
        let method = endpoint.method.as_str();
        let operation = &DOCUMENT["paths"][&template][method.to_lowercase()];
        for probe in probes(method, &template, operation, &fixtures) {
            let mut request = app
                .client
                .request(probe.method.clone(), app.url(&probe.path))
                .bearer_auth(&key);
            request = match probe.body {
                Sent::None => request,
                Sent::Json(body) => request.json(&body),
                Sent::Raw {
                    content_type,
                    bytes,
                } => request.header("content-type", content_type).body(bytes),
            };
            let response = request.send().await.unwrap();
            let etag = response.headers().get("etag").cloned();
            let (status, body) = check(method, &template, response).await;
            assert_eq!(status, probe.status, "{} {}", probe.method, probe.path);
            if let Some(start) = &probe.reason_starts {
                let error: Value = serde_json::from_slice(&body).unwrap();
                let reason = error["reason"].as_str().unwrap();
                assert!(
                    reason.starts_with(start.as_str()),
                    "{} {}: the reason should name {start}: {reason}",
                    probe.method,
                    probe.path
                );
            }
            checked += 1;
            // A conditional read: the 304 of its own tag follows the contract too.
            if endpoint.is_conditional() && status == StatusCode::OK {
                let etag = etag.unwrap_or_else(|| panic!("{}: no ETag", probe.path));
                let again = app
                    .client
                    .get(app.url(&probe.path))
                    .bearer_auth(&key)
                    .header("If-None-Match", etag)
                    .send()
                    .await
                    .unwrap();
                let (status, _) = check(method, &template, again).await;
                assert_eq!(status, StatusCode::NOT_MODIFIED, "{}", probe.path);
                checked += 1;
            }
        }
        if endpoint.access != Access::Public {
            let path = template.replace("{id}", "x");
            let m = Method::from_bytes(method.as_bytes()).unwrap();
            let anonymous = app.client.request(m, app.url(&path)).send().await.unwrap();
            assert_eq!(
                check(method, &template, anonymous).await.0,
                StatusCode::UNAUTHORIZED
            );
            checked += 1;
        }
        if !endpoint.access.scopes().is_empty() {
            let path = template.replace("{id}", "x");
            let m = Method::from_bytes(method.as_bytes()).unwrap();
            let forbidden = app
                .client
                .request(m, app.url(&path))
                .bearer_auth(&no_scope)
                .send()
                .await
                .unwrap();
            assert_eq!(
                check(method, &template, forbidden).await.0,
                StatusCode::FORBIDDEN
            );
            checked += 1;
        }
    }
    eprintln!("{checked} responses checked against the contract");
    assert!(checked > 150, "{checked} responses checked");
}

#[tokio::test]
async fn a_rate_limited_response_follows_the_contract() {
    let limiter = || -> Arc<dyn posture_domain::rate_limit::RateLimiter> {
        Arc::new(crate::harness::held_limiter(RatePolicy {
            limit: 1,
            window_secs: 900,
        }))
    };
    let app = TestApp::with_limiter(limiter, TrustedProxies::default()).await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let first = app.get("/api/v1/tenants", &key).await;
    assert_eq!(
        check("GET", "/api/v1/tenants", first).await.0,
        StatusCode::OK
    );
    let limited = app.get("/api/v1/tenants", &key).await;
    assert_eq!(
        check("GET", "/api/v1/tenants", limited).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn the_served_document_is_the_committed_one() {
    let app = TestApp::start().await;
    let served = app
        .client
        .get(app.url("/api/v1/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(served.status(), StatusCode::OK, "no key needed");
    let served = served.text().await.unwrap();
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/openapi.json"
    ))
    .unwrap();
    assert_eq!(served, committed, "run cargo xtask openapi");
    let document: Value = serde_json::from_str(&served).unwrap();
    assert!(document["openapi"].as_str().unwrap().starts_with("3.1"));
    for endpoint in ENDPOINTS {
        let operation =
            &document["paths"][endpoint.full_path()][endpoint.method.as_str().to_lowercase()];
        assert_eq!(operation["operationId"], endpoint.operation_id);
        // A key or an OAuth access token, holding the same scopes.
        let scopes: Vec<&str> = endpoint
            .access
            .scopes()
            .iter()
            .map(|s| s.as_str())
            .collect();
        match endpoint.access {
            Access::Scope(_) | Access::AllOf(_) | Access::AnyKey => assert_eq!(
                operation["security"],
                json!([{"bearerAuth": scopes}, {"oauth2": scopes}])
            ),
            Access::Public => assert_eq!(operation["security"], json!([{}])),
        }
    }
    let flow = &document["components"]["securitySchemes"]["oauth2"]["flows"]["clientCredentials"];
    assert_eq!(flow["tokenUrl"], "/oauth/token");
    let scopes = flow["scopes"].as_object().unwrap();
    assert!(
        Scope::ALL
            .iter()
            .all(|scope| scopes.contains_key(scope.as_str()))
    );
    for event in [
        "finding_critical",
        "finding_high",
        "finding_medium",
        "finding_low",
    ] {
        assert!(
            document["webhooks"][event]["post"]["requestBody"].is_object(),
            "{event}"
        );
    }
}
