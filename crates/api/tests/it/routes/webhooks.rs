//! `/api/v1/webhooks`: validation, the secret shown once, isolation, soft delete.

use posture_domain::{Scope, WebhookId, ports::WebhookRepository, webhook::secret_context};
use posture_test_support::logs;
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use crate::support::{TestApp, assert_error, test_keyring};

fn valid() -> Value {
    json!({"name": "SIEM", "webhookUrl": "https://hooks.example.com/posture",
           "webhookType": "generic", "eventTypes": ["finding_critical", "finding_high"]})
}

async fn post(app: &TestApp, key: &str, body: &Value) -> Response {
    app.client
        .post(app.url("/api/v1/webhooks"))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn key(app: &TestApp, name: &str) -> (posture_domain::CustomerScope, String) {
    let (customer, _) = app.customer(name).await;
    let (_, key) = app.key(customer, &[Scope::ManageWebhooks]).await;
    (customer, key)
}

#[tokio::test]
async fn creating_returns_201_with_the_subscription_and_its_signing_secret() {
    let app = TestApp::start().await;
    let (_, key) = key(&app, "A").await;
    let response = post(&app, &key, &valid()).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let body: Value = response.json().await.unwrap();
    let data = &body["data"];
    assert_eq!(
        location,
        format!("/api/v1/webhooks/{}", data["id"].as_str().unwrap())
    );
    assert_eq!(data["name"], "SIEM");
    assert_eq!(data["webhookUrl"], "https://hooks.example.com/posture");
    assert_eq!(data["webhookType"], "generic");
    assert_eq!(
        data["eventTypes"],
        json!(["finding_critical", "finding_high"])
    );
    assert_eq!(data["active"], true);
    assert!(data["createdAt"].is_string());
    let secret = data["signingSecret"].as_str().unwrap();
    assert!(
        secret.starts_with("whsec_") && secret.len() == 6 + 44,
        "{secret}"
    );
}

#[tokio::test]
async fn the_secret_is_in_the_create_response_only_never_in_reads_or_logs() {
    let app = TestApp::start().await;
    let (_, key) = key(&app, "A").await;
    let created: Value = post(&app, &key, &valid()).await.json().await.unwrap();
    let id = created["data"]["id"].as_str().unwrap();
    let secret = created["data"]["signingSecret"].as_str().unwrap();
    let list = app
        .get("/api/v1/webhooks", &key)
        .await
        .text()
        .await
        .unwrap();
    let read = app
        .get(&format!("/api/v1/webhooks/{id}"), &key)
        .await
        .text()
        .await
        .unwrap();
    for (what, text) in [("list", &list), ("read", &read)] {
        assert!(!text.contains("signingSecret"), "{what}: {text}");
        assert!(!text.contains(&secret[6..]), "{what}: {text}");
    }
    let read: Value = serde_json::from_str(&read).unwrap();
    assert_eq!(read["data"]["id"], id);
    let logged = logs::captured();
    assert!(logged.contains("request served"), "logs are being captured");
    assert!(
        !logged.contains(&secret[6..]),
        "the signing secret reached the logs"
    );
}

#[tokio::test]
async fn the_stored_secret_is_sealed_and_opens_to_the_one_returned() {
    let app = TestApp::start().await;
    let (customer, key) = key(&app, "A").await;
    let created: Value = post(&app, &key, &valid()).await.json().await.unwrap();
    let id: WebhookId = created["data"]["id"].as_str().unwrap().parse().unwrap();
    let sealed = app
        .store
        .sealed_secrets(customer, id)
        .await
        .unwrap()
        .current;
    let secret = created["data"]["signingSecret"].as_str().unwrap();
    assert!(!String::from_utf8_lossy(&sealed.ciphertext).contains(&secret[6..]));
    assert_eq!(sealed.nonce.len(), 12);
    assert_eq!(sealed.key_id, test_keyring().current_key_id());
    let opened = test_keyring()
        .open(&sealed, &secret_context(customer.customer_id(), id))
        .unwrap();
    assert_eq!(opened.expose(), secret);
}

#[tokio::test]
async fn each_body_rule_is_422_naming_the_field() {
    let app = TestApp::strict_webhooks().await;
    let (_, key) = key(&app, "A").await;
    let long_url = format!("https://hooks.example.com/{}", "a".repeat(2040));
    let cases: Vec<(&str, Value, &str)> = vec![
        ("name", json!(null), "missing field `name`"),
        ("name", json!(""), "name"),
        ("name", json!("x".repeat(101)), "name"),
        (
            "name",
            json!(7),
            "name: invalid type: integer `7`, expected a string",
        ),
        ("webhookUrl", json!(null), "missing field `webhookUrl`"),
        (
            "webhookUrl",
            json!("hooks.example.com/x"),
            "webhookUrl is not an absolute URL",
        ),
        (
            "webhookUrl",
            json!("http://hooks.example.com/x"),
            "webhookUrl must use https",
        ),
        (
            "webhookUrl",
            json!("https://u:p@hooks.example.com/x"),
            "webhookUrl must not contain credentials",
        ),
        (
            "webhookUrl",
            json!(long_url),
            "webhookUrl must be at most 2048",
        ),
        (
            "webhookUrl",
            json!("https://127.0.0.1/x"),
            "webhookUrl points to a loopback",
        ),
        (
            "webhookUrl",
            json!("https://10.1.2.3/x"),
            "webhookUrl points to a loopback",
        ),
        (
            "webhookUrl",
            json!("https://169.254.169.254/latest"),
            "webhookUrl points to a loopback",
        ),
        (
            "webhookUrl",
            json!("https://[::ffff:127.0.0.1]/x"),
            "webhookUrl points to a loopback",
        ),
        (
            "webhookUrl",
            json!("https://[::127.0.0.1]/x"),
            "webhookUrl points to a loopback",
        ),
        (
            "webhookUrl",
            json!("https://[64:ff9b:1::a00:1]/x"),
            "webhookUrl points to a loopback",
        ),
        (
            "webhookUrl",
            json!("https://[2002:a00:1::1]/x"),
            "webhookUrl points to a loopback",
        ),
        ("webhookType", json!("discord"), "webhookType"),
        ("webhookType", json!(null), "missing field `webhookType`"),
        ("eventTypes", json!([]), "eventTypes must list at least one"),
        ("eventTypes", json!(["finding_info"]), "eventTypes"),
        (
            "eventTypes",
            json!("finding_high"),
            "eventTypes: invalid type: string \"finding_high\", expected a sequence",
        ),
        (
            "eventTypes",
            json!([1]),
            "eventTypes[0]: invalid type: integer `1`, expected a string",
        ),
    ];
    for (field, value, expected) in cases {
        let mut body = valid();
        if value.is_null() {
            body.as_object_mut().unwrap().remove(field);
        } else {
            body[field] = value;
        }
        let reason = assert_error(
            post(&app, &key, &body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unprocessable_entity",
        )
        .await;
        assert!(
            reason.starts_with(expected),
            "{field}: {reason:?} should start with {expected:?}"
        );
    }
    let mut unknown = valid();
    unknown["secret"] = json!("mine");
    let reason = assert_error(
        post(&app, &key, &unknown).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "unprocessable_entity",
    )
    .await;
    assert!(reason.starts_with("unknown field `secret`"), "{reason}");
    assert_eq!(
        app.get_json("/api/v1/webhooks", &key, StatusCode::OK).await["meta"]["total"],
        0,
        "nothing was created"
    );
}

#[tokio::test]
async fn duplicate_event_types_are_stored_once() {
    let app = TestApp::start().await;
    let (_, key) = key(&app, "A").await;
    let mut body = valid();
    body["eventTypes"] = json!(["finding_low", "finding_low", "finding_high"]);
    let created: Value = post(&app, &key, &body).await.json().await.unwrap();
    assert_eq!(
        created["data"]["eventTypes"],
        json!(["finding_low", "finding_high"])
    );
}

#[tokio::test]
async fn a_body_that_is_not_json_is_415_or_400() {
    let app = TestApp::start().await;
    let (_, key) = key(&app, "A").await;
    let url = app.url("/api/v1/webhooks");
    let plain = app
        .client
        .post(&url)
        .bearer_auth(&key)
        .header("content-type", "text/plain")
        .body(valid().to_string())
        .send()
        .await
        .unwrap();
    assert_error(
        plain,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;
    let no_type = app
        .client
        .post(&url)
        .bearer_auth(&key)
        .body(valid().to_string())
        .send()
        .await
        .unwrap();
    assert_error(
        no_type,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;
    let broken = app
        .client
        .post(&url)
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .unwrap();
    assert_error(broken, StatusCode::BAD_REQUEST, "invalid_request").await;
    let array = app
        .client
        .post(&url)
        .bearer_auth(&key)
        .json(&json!([valid()]))
        .send()
        .await
        .unwrap();
    assert_error(
        array,
        StatusCode::UNPROCESSABLE_ENTITY,
        "unprocessable_entity",
    )
    .await;
}

#[tokio::test]
async fn a_body_over_256_kib_is_413() {
    let app = TestApp::start().await;
    let (_, key) = key(&app, "A").await;
    let mut body = valid();
    body["name"] = json!("x".repeat(260 * 1024));
    let reason = assert_error(
        post(&app, &key, &body).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    )
    .await;
    assert!(reason.contains("256 KiB"), "{reason}");
}

#[tokio::test]
async fn more_than_25_active_subscriptions_is_409() {
    let app = TestApp::start().await;
    let (_, key) = key(&app, "A").await;
    let mut ids = Vec::new();
    for i in 0..25 {
        let mut body = valid();
        body["name"] = json!(format!("hook {i}"));
        let created: Value = post(&app, &key, &body).await.json().await.unwrap();
        ids.push(created["data"]["id"].as_str().unwrap().to_owned());
    }
    let reason = assert_error(
        post(&app, &key, &valid()).await,
        StatusCode::CONFLICT,
        "conflict",
    )
    .await;
    assert!(reason.contains("25"), "{reason}");
    // Deactivating one frees a place.
    let deleted = app
        .client
        .delete(app.url(&format!("/api/v1/webhooks/{}", ids[0])))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        post(&app, &key, &valid()).await.status(),
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn deleting_deactivates_the_subscription_for_good() {
    let app = TestApp::start().await;
    let (customer, key) = key(&app, "A").await;
    let created: Value = post(&app, &key, &valid()).await.json().await.unwrap();
    let id = created["data"]["id"].as_str().unwrap();
    let path = format!("/api/v1/webhooks/{id}");
    let deleted = app
        .client
        .delete(app.url(&path))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    assert_eq!(deleted.content_length(), Some(0));
    assert_error(
        app.get(&path, &key).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let list = app.get_json("/api/v1/webhooks", &key, StatusCode::OK).await;
    assert_eq!(list["meta"]["total"], 0);
    let again = app
        .client
        .delete(app.url(&path))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_error(again, StatusCode::NOT_FOUND, "not_found").await;
    // The row is kept, deactivated (soft delete).
    let id: WebhookId = id.parse().unwrap();
    assert!(app.store.get_subscription(customer, id).await.is_err());
    assert_eq!(row_state(&app, id).await, (false, true));
}

/// (active, has a deactivation time) of a subscription row, read directly.
async fn row_state(app: &TestApp, id: WebhookId) -> (bool, bool) {
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        active: bool,
        #[diesel(sql_type = diesel::sql_types::Bool)]
        deactivated: bool,
    }
    let mut conn = AsyncPgConnection::establish(app.db.url()).await.unwrap();
    let row: Row = diesel::sql_query("SELECT active, deactivated_at IS NOT NULL AS deactivated FROM webhook_subscriptions WHERE id = $1")
        .bind::<diesel::sql_types::Uuid, _>(id.as_uuid())
        .get_result(&mut conn)
        .await
        .unwrap();
    (row.active, row.deactivated)
}

#[tokio::test]
async fn another_customers_subscription_is_404_to_read_and_delete_and_stays_untouched() {
    let app = TestApp::start().await;
    let (_, key_a) = key(&app, "A").await;
    let (_, key_b) = key(&app, "B").await;
    let created: Value = post(&app, &key_b, &valid()).await.json().await.unwrap();
    let path = format!(
        "/api/v1/webhooks/{}",
        created["data"]["id"].as_str().unwrap()
    );
    assert_error(
        app.get(&path, &key_a).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let delete = app
        .client
        .delete(app.url(&path))
        .bearer_auth(&key_a)
        .send()
        .await
        .unwrap();
    assert_error(delete, StatusCode::NOT_FOUND, "not_found").await;
    assert_eq!(
        app.get_json("/api/v1/webhooks", &key_a, StatusCode::OK)
            .await["meta"]["total"],
        0
    );
    let still = app.get_json(&path, &key_b, StatusCode::OK).await;
    assert_eq!(still["data"]["active"], true);
}

#[tokio::test]
async fn a_malformed_webhook_id_is_404() {
    let app = TestApp::start().await;
    let (_, key) = key(&app, "A").await;
    assert_error(
        app.get("/api/v1/webhooks/not-a-uuid", &key).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}
