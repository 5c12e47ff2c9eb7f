//! The contract test: every operation of the route table, called for real, answers as the
//! OpenAPI document says — a documented status, the documented headers, a body valid against
//! the documented schema. A route without a probe here fails the test.

use std::sync::{Arc, LazyLock};

use chrono::Utc;

use posture_domain::{
    Scope,
    rate_limit::{InProcessRateLimiter, RatePolicy},
};
use posture_http::{
    TrustedProxies, openapi,
    routes::{Access, ENDPOINTS},
};
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::support::TestApp;

static DOCUMENT: LazyLock<Value> =
    LazyLock::new(|| serde_json::to_value(openapi::document()).unwrap());

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

/// A request to make for an operation, and the status it must get.
struct Probe {
    method: Method,
    path: String,
    body: Option<Value>,
    status: StatusCode,
}

fn post(path: String, body: Option<Value>, status: StatusCode) -> Probe {
    Probe {
        method: Method::POST,
        path,
        body,
        status,
    }
}

fn get(path: impl Into<String>, status: StatusCode) -> Probe {
    Probe {
        method: Method::GET,
        path: path.into(),
        body: None,
        status,
    }
}

/// The probes of an operation, successes and errors.
fn probes(operation_id: &str, tenant: &str, webhook: &str, delivery: &str) -> Vec<Probe> {
    use StatusCode as S;
    let v1 = "/api/v1";
    match operation_id {
        "listIdentities" => vec![
            get(format!("{v1}/identities?tenant={tenant}"), S::OK),
            get(format!("{v1}/identities?limit=x"), S::BAD_REQUEST),
        ],
        "getIdentity" => vec![
            get(format!("{v1}/identities/u1"), S::OK),
            get(format!("{v1}/identities/nope"), S::NOT_FOUND),
        ],
        "listFindings" => vec![
            get(
                format!("{v1}/findings?severity=critical,high&status=open"),
                S::OK,
            ),
            get(format!("{v1}/findings?severity=bad"), S::BAD_REQUEST),
        ],
        "exportFindings" => vec![
            get(format!("{v1}/findings/export"), S::OK),
            get(format!("{v1}/findings/export?format=cef"), S::OK),
            get(format!("{v1}/findings/export?format=ocsf"), S::OK),
            get(format!("{v1}/findings/export?format=xml"), S::BAD_REQUEST),
        ],
        "getFinding" => vec![
            get(format!("{v1}/findings/f1"), S::OK),
            get(format!("{v1}/findings/nope"), S::NOT_FOUND),
        ],
        "listRoleRecommendations" => vec![get(format!("{v1}/roles"), S::OK)],
        "getUprRollup" => vec![get(format!("{v1}/upr?tenant={tenant}"), S::OK)],
        "listUprPrincipals" => vec![get(format!("{v1}/upr/principals?minScore=10"), S::OK)],
        "getUprTrend" => vec![
            get(format!("{v1}/upr/trend?days=7"), S::OK),
            get(format!("{v1}/upr/trend?days=0"), S::BAD_REQUEST),
        ],
        "listTenants" => vec![
            get(format!("{v1}/tenants"), S::OK),
            get(
                format!("{v1}/tenants?tenant=00000000-0000-4000-8000-000000000000"),
                S::NOT_FOUND,
            ),
        ],
        "createWebhook" => vec![
            Probe {
                method: Method::POST,
                path: format!("{v1}/webhooks"),
                body: Some(
                    json!({"name": "c", "webhookUrl": "https://hooks.example.com/x", "webhookType": "teams", "eventTypes": ["finding_low"]}),
                ),
                status: S::CREATED,
            },
            Probe {
                method: Method::POST,
                path: format!("{v1}/webhooks"),
                body: Some(json!({"name": ""})),
                status: S::UNPROCESSABLE_ENTITY,
            },
        ],
        "listWebhooks" => vec![get(format!("{v1}/webhooks"), S::OK)],
        "getWebhook" => vec![
            get(format!("{v1}/webhooks/{webhook}"), S::OK),
            get(
                format!("{v1}/webhooks/00000000-0000-4000-8000-000000000000"),
                S::NOT_FOUND,
            ),
        ],
        "deleteWebhook" => vec![
            Probe {
                method: Method::DELETE,
                path: format!("{v1}/webhooks/{webhook}"),
                body: None,
                status: S::NO_CONTENT,
            },
            Probe {
                method: Method::DELETE,
                path: format!("{v1}/webhooks/{webhook}"),
                body: None,
                status: S::NOT_FOUND,
            },
        ],
        "updateWebhook" => {
            let path = format!("{v1}/webhooks/{webhook}");
            vec![
                Probe {
                    method: Method::PATCH,
                    path: path.clone(),
                    body: Some(json!({"name": "renamed", "active": true})),
                    status: S::OK,
                },
                Probe {
                    method: Method::PATCH,
                    path,
                    body: Some(json!({"webhookType": "slack"})),
                    status: S::UNPROCESSABLE_ENTITY,
                },
            ]
        }
        "rotateWebhookSecret" => {
            let path = format!("{v1}/webhooks/{webhook}/rotate-secret");
            vec![
                post(path.clone(), Some(json!({})), S::OK),
                post(path, Some(json!({"gracePeriodSeconds": 60})), S::CONFLICT),
            ]
        }
        "listWebhookDeliveries" => vec![
            get(format!("{v1}/webhooks/{webhook}/deliveries"), S::OK),
            get(
                format!("{v1}/webhooks/{webhook}/deliveries?status=lost"),
                S::BAD_REQUEST,
            ),
        ],
        "getWebhookDelivery" => vec![
            get(
                format!("{v1}/webhooks/{webhook}/deliveries/{delivery}"),
                S::OK,
            ),
            get(
                format!("{v1}/webhooks/{webhook}/deliveries/00000000-0000-4000-8000-000000000000"),
                S::NOT_FOUND,
            ),
        ],
        "redeliverWebhookDelivery" => {
            let path = format!("{v1}/webhooks/{webhook}/deliveries/{delivery}/redeliver");
            vec![
                post(path.clone(), None, S::ACCEPTED),
                post(path, None, S::CONFLICT),
            ]
        }
        "recoverWebhookDeliveries" => {
            let path = format!("{v1}/webhooks/{webhook}/recover");
            let since = |days: i64| (Utc::now() - chrono::Duration::days(days)).to_rfc3339();
            vec![
                post(path.clone(), Some(json!({"since": since(1)})), S::ACCEPTED),
                post(
                    path,
                    Some(json!({"since": since(400)})),
                    S::UNPROCESSABLE_ENTITY,
                ),
            ]
        }
        "testWebhook" => {
            let path = format!("{v1}/webhooks/{webhook}/test");
            vec![
                post(
                    path.clone(),
                    Some(json!({"eventType": "finding_high"})),
                    S::OK,
                ),
                post(
                    path,
                    Some(json!({"eventType": "finding_urgent"})),
                    S::UNPROCESSABLE_ENTITY,
                ),
            ]
        }
        "getCurrentKey" => vec![get(format!("{v1}/keys/current"), S::OK)],
        "getOpenApi" => vec![get(format!("{v1}/openapi.json"), S::OK)],
        other => panic!("no contract probe for operation {other}: add one to contract.rs"),
    }
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

    let mut checked = 0;
    for endpoint in ENDPOINTS {
        let template = endpoint.full_path();
        let method = endpoint.method.as_str();
        for probe in probes(endpoint.operation_id, &tenant, &webhook, &delivery) {
            let mut request = app
                .client
                .request(probe.method.clone(), app.url(&probe.path))
                .bearer_auth(&key);
            if let Some(body) = &probe.body {
                request = request.json(body);
            }
            let response = request.send().await.unwrap();
            let etag = response.headers().get("etag").cloned();
            let (status, _) = check(method, &template, response).await;
            assert_eq!(status, probe.status, "{} {}", probe.method, probe.path);
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
        if endpoint.access.scope().is_some() {
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
    assert!(checked > 40, "{checked} responses checked");
}

#[tokio::test]
async fn a_rate_limited_response_follows_the_contract() {
    let limiter = || -> Arc<dyn posture_domain::rate_limit::RateLimiter> {
        Arc::new(InProcessRateLimiter::new(RatePolicy {
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
        match endpoint.access {
            Access::Scope(scope) => assert_eq!(
                operation["security"],
                json!([{"bearerAuth": [scope.as_str()]}])
            ),
            Access::AnyKey => assert_eq!(operation["security"], json!([{"bearerAuth": []}])),
            Access::Public => assert_eq!(operation["security"], json!([{}])),
        }
    }
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
