//! A declared default means exactly what leaving the parameter out means:
//! clients generated from the contract send every default they find, so for every parameter
//! of every operation that declares one, sending it explicitly must give the same status and
//! the same body as leaving it out — alone, and beside the parameters a sync sends.
//!
//! No exceptions: a parameter whose absence means something no single value says (`order`,
//! whose absence follows `modifiedSince`) declares no default, and this test cannot be
//! satisfied by declaring one.

use std::sync::LazyLock;

use posture_http::{openapi, routes::ENDPOINTS};
use posture_test_support::fixtures::{finding, identity, recommendation};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::TestApp;

static DOCUMENT: LazyLock<Value> =
    LazyLock::new(|| serde_json::to_value(openapi::document()).unwrap());

/// The query parameters of `(method, template)` that declare a default, with its value as a
/// query string writes it.
fn declared_defaults(method: &str, template: &str) -> Vec<(String, String)> {
    let operation = &DOCUMENT["paths"][template][method.to_lowercase()];
    let mut found = Vec::new();
    for parameter in operation["parameters"].as_array().into_iter().flatten() {
        let parameter = resolve(parameter);
        if parameter["in"] != "query" {
            continue;
        }
        let schema = resolve(&parameter["schema"]);
        if let Some(default) = schema.get("default") {
            let value = match default {
                Value::String(text) => text.clone(),
                Value::Array(items) => items
                    .iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.to_string(),
            };
            found.push((parameter["name"].as_str().unwrap().to_owned(), value));
        }
    }
    found
}

fn resolve(value: &Value) -> &Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(reference) => resolve(
            DOCUMENT
                .pointer(reference.strip_prefix('#').unwrap())
                .unwrap(),
        ),
        None => value,
    }
}

/// Whether the operation takes query parameter `name`.
fn takes(method: &str, template: &str, name: &str) -> bool {
    DOCUMENT["paths"][template][method.to_lowercase()]["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|p| resolve(p)["name"] == name)
}

/// The queries each default is tried beside: alone, a short page (so a next cursor is in the
/// body), and the requests of a sync (a watermark, then the next page by cursor).
fn companions(method: &str, template: &str) -> Vec<String> {
    let paged = takes(method, template, "limit");
    let synced = takes(method, template, "modifiedSince");
    let mut queries = vec![String::new()];
    if paged {
        queries.push("limit=1".to_owned());
    }
    if synced {
        queries.push("modifiedSince=2000-01-01T00:00:00Z".to_owned());
    }
    if paged && synced {
        queries.push("modifiedSince=2000-01-01T00:00:00Z&limit=1".to_owned());
    }
    queries
}

fn joined(query: &str, extra: &str) -> String {
    match (query.is_empty(), extra.is_empty()) {
        (true, _) => extra.to_owned(),
        (_, true) => query.to_owned(),
        _ => format!("{query}&{extra}"),
    }
}

#[tokio::test]
async fn a_declared_default_means_what_leaving_the_parameter_out_means() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let records = vec![
        identity("u1", &t, "Ada"),
        identity("u2", &t, "Grace"),
        finding("f1", &t, "critical", "open", "u1"),
        finding("f2", &t, "high", "open", "u2"),
        finding("f3", &t, "high", "resolved", "u2"),
        recommendation("r1", &t, "u1"),
        recommendation("r2", &t, "u2"),
    ];
    app.ingest(customer, &records).await;
    // A second pass changes one row of each, so an order by modification differs from the
    // lists' own orders.
    let mut changed = records.clone();
    changed[0]["displayName"] = json!("Ada L.");
    changed[2]["status"] = json!("resolved");
    changed[5]["currentRoles"] = json!(["Owner"]);
    app.ingest(customer, &changed).await;
    let webhook: Value = app
        .client
        .post(app.url("/api/v1/webhooks"))
        .bearer_auth(&key)
        .json(
            &json!({"name": "w", "webhookUrl": "https://hooks.example.com/w",
                      "webhookType": "generic", "eventTypes": ["finding_high"]}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let webhook = webhook["data"]["id"].as_str().unwrap().to_owned();

    let mut compared = Vec::new();
    for endpoint in ENDPOINTS.iter().filter(|e| e.method.as_str() == "GET") {
        let template = endpoint.full_path();
        let defaults = declared_defaults("GET", &template);
        let path = template
            .replace(
                "{id}",
                if template.contains("webhooks") {
                    &webhook
                } else {
                    "f1"
                },
            )
            .replace("/identities/f1", "/identities/u1");
        for (name, value) in &defaults {
            let companions = companions("GET", &template);
            let beside = companions.iter().filter(|c| {
                !c.split('&')
                    .any(|pair| pair.starts_with(&format!("{name}=")))
            });
            for companion in beside {
                let without = app.get(&format!("{path}?{companion}"), &key).await;
                let with_query = joined(companion, &format!("{name}={value}"));
                let with = app.get(&format!("{path}?{with_query}"), &key).await;
                let (status, status_with) = (without.status(), with.status());
                let (body, body_with) =
                    (without.bytes().await.unwrap(), with.bytes().await.unwrap());
                assert_eq!(
                    (status, String::from_utf8_lossy(&body)),
                    (status_with, String::from_utf8_lossy(&body_with)),
                    "GET {path}: `{name}={value}` (its declared default) beside `{companion}` \
                     differs from leaving it out"
                );
                assert_ne!(status, StatusCode::BAD_REQUEST, "{path}?{with_query}");
                compared.push(format!("{}: {name}", endpoint.operation_id));
            }
        }
    }
    // Every declared default was tried: limit and offset on each list, days, format.
    for expected in [
        "listFindings: limit",
        "listFindings: offset",
        "exportFindings: format",
        "getUprTrend: days",
        "listWebhookDeliveries: offset",
    ] {
        assert!(
            compared.iter().any(|c| c == expected),
            "{expected} was not compared: {compared:?}"
        );
    }
}

#[test]
fn a_parameter_whose_absence_depends_on_another_declares_no_default() {
    for template in ["/api/v1/findings", "/api/v1/identities", "/api/v1/roles"] {
        assert!(takes("GET", template, "order"), "{template}");
        assert!(
            !declared_defaults("GET", template)
                .iter()
                .any(|(name, _)| name == "order"),
            "{template}: `order` must not declare a default (its absence follows modifiedSince)"
        );
    }
}
