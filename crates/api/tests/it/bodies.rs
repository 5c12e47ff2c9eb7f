//! Request bodies as the contract declares them: an operation whose body has no required
//! field (`requestBody.required: false`) accepts no body at all, as if it were `{}`; one with
//! a required field answers 415 without one.

use std::sync::LazyLock;

use posture_http::{openapi, routes::ENDPOINTS};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::TestApp;

static DOCUMENT: LazyLock<Value> =
    LazyLock::new(|| serde_json::to_value(openapi::document()).unwrap());

async fn webhook(app: &TestApp, key: &str) -> String {
    let created: Value = app
        .client
        .post(app.url("/api/v1/webhooks"))
        .bearer_auth(key)
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
    created["data"]["id"].as_str().unwrap().to_owned()
}

/// Calls the operation on a subscription of its own: with no body at all (no
/// `Content-Type` either), or with `body`.
async fn call(
    app: &TestApp,
    key: &str,
    method: &str,
    template: &str,
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let path = template.replace("{id}", &webhook(app, key).await);
    let mut request = app
        .client
        .request(
            Method::from_bytes(method.as_bytes()).unwrap(),
            app.url(&path),
        )
        .bearer_auth(key);
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn an_operation_whose_body_is_all_optional_accepts_none() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let (mut optional, mut required) = (Vec::new(), Vec::new());
    for endpoint in ENDPOINTS.iter().filter(|e| e.handler.body.is_some()) {
        let (method, template) = (endpoint.method.as_str(), endpoint.full_path());
        let declared = &DOCUMENT["paths"][&template][method.to_lowercase()]["requestBody"];
        let (without, body) = call(&app, &key, method, &template, None).await;
        if declared["required"] == true {
            assert_eq!(
                without,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{method} {template} without a body: {body}"
            );
            required.push(endpoint.operation_id);
        } else {
            let (empty, _) = call(&app, &key, method, &template, Some(&json!({}))).await;
            assert_eq!(
                without, empty,
                "{method} {template}: no body answers otherwise than {{}}: {body}"
            );
            assert!(without.is_success(), "{method} {template}: {body}");
            optional.push(endpoint.operation_id);
        }
    }
    optional.sort_unstable();
    required.sort_unstable();
    assert_eq!(
        optional,
        ["rotateWebhookSecret", "testWebhook", "updateWebhook"]
    );
    assert_eq!(
        required,
        [
            "createWebhook",
            "recoverWebhookDeliveries",
            "triageFinding",
            "triageFindings"
        ]
    );
}

#[tokio::test]
async fn an_empty_body_sent_as_json_is_the_empty_object_where_every_field_is_optional() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let id = webhook(&app, &key).await;
    let response = app
        .client
        .post(app.url(&format!("/api/v1/webhooks/{id}/rotate-secret")))
        .bearer_auth(&key)
        .header("Content-Type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["data"]["signingSecret"]
            .as_str()
            .unwrap()
            .starts_with("whsec_"),
        "{body}"
    );
    // A required field still makes an empty body a 400 (not JSON), as before.
    let response = app
        .client
        .post(app.url("/api/v1/webhooks"))
        .bearer_auth(&key)
        .header("Content-Type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}
