//! `PATCH /webhooks/{id}`: edits checked like a creation, guarded by `If-Match`; pausing
//! holds deliveries and resuming sends them; the worker disables a subscription that only
//! fails, and cancels what a pause held too long.

use diesel_async::RunQueryDsl;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Ops, hook, receiver};
use crate::support::assert_error;

impl Ops {
    /// A PATCH with these extra headers.
    async fn patch(
        &self,
        webhook: &str,
        body: Value,
        headers: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut request = self
            .app
            .client
            .patch(self.app.url(&format!("/api/v1/webhooks/{webhook}")))
            .bearer_auth(&self.key)
            .json(&body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.unwrap()
    }

    async fn subscription(&self, webhook: &str) -> Value {
        self.json(
            Method::GET,
            &format!("/webhooks/{webhook}"),
            None,
            StatusCode::OK,
        )
        .await["data"]
            .clone()
    }

    async fn sql(&self, statement: &str) {
        let mut conn = self.app.db.connection().await;
        diesel::sql_query(statement)
            .execute(&mut conn)
            .await
            .unwrap();
    }
}

fn etag(response: &reqwest::Response) -> String {
    response.headers()["etag"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_patch_changes_what_it_names_and_if_match_guards_against_a_concurrent_change() {
    let ops = Ops::new().await;
    let (webhook, _) = ops
        .subscribe("http://127.0.0.1:9/a", "generic", &["finding_high"])
        .await;
    let read = ops
        .call(Method::GET, &format!("/webhooks/{webhook}"), None)
        .await;
    let first = etag(&read);
    assert_eq!(first, "\"v1\"", "a strong tag");

    let changed = ops
        .patch(
            &webhook,
            json!({"name": "SIEM", "eventTypes": ["finding_critical"]}),
            &[("If-Match", &first)],
        )
        .await;
    assert_eq!(changed.status(), StatusCode::OK);
    let second = etag(&changed);
    assert_ne!(second, first);
    let body: Value = changed.json().await.unwrap();
    assert_eq!(body["data"]["name"], "SIEM");
    assert_eq!(body["data"]["eventTypes"], json!(["finding_critical"]));
    assert_eq!(body["data"]["webhookUrl"], "http://127.0.0.1:9/a", "kept");

    // Another writer used the old tag: refused, nothing changed.
    for stale in [first.as_str(), &format!("W/{second}"), "\"x\""] {
        let response = ops
            .patch(
                &webhook,
                json!({"name": "lost update"}),
                &[("If-Match", stale)],
            )
            .await;
        let reason = assert_error(
            response,
            StatusCode::PRECONDITION_FAILED,
            "precondition_failed",
        )
        .await;
        assert!(reason.contains("changed since"), "{reason}");
    }
    assert_eq!(ops.subscription(&webhook).await["name"], "SIEM");
    let any = ops
        .patch(&webhook, json!({"name": "any"}), &[("If-Match", "*")])
        .await;
    assert_eq!(any.status(), StatusCode::OK);
    let current = etag(&any);
    let listed = ops
        .patch(
            &webhook,
            json!({}),
            &[("If-Match", &format!("\"v99\", {current}"))],
        )
        .await;
    assert_eq!(listed.status(), StatusCode::OK, "any of a list");
    assert_eq!(etag(&listed), current, "an empty patch changes nothing");

    let unchanged = ops
        .app
        .client
        .get(ops.app.url(&format!("/api/v1/webhooks/{webhook}")))
        .bearer_auth(&ops.key)
        .header("If-None-Match", &current)
        .send()
        .await
        .unwrap();
    assert_eq!(unchanged.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(etag(&unchanged), current);
}

#[tokio::test]
async fn a_patch_is_checked_like_a_creation_and_immutable_or_null_fields_are_422() {
    let ops = Ops::new().await;
    let (webhook, _) = ops
        .subscribe("http://127.0.0.1:9/a", "generic", &["finding_high"])
        .await;
    for (body, names) in [
        (json!({"webhookUrl": "ftp://example.com/x"}), "webhookUrl"),
        (json!({"name": "  "}), "name"),
        (json!({"eventTypes": []}), "eventTypes"),
        (json!({"eventTypes": ["finding_urgent"]}), "eventTypes"),
        (
            json!({"webhookType": "slack"}),
            "webhookType cannot be changed",
        ),
        (
            json!({"signingSecret": "whsec_mine"}),
            "signingSecret cannot be changed",
        ),
        (json!({"name": null}), "name cannot be null"),
        (json!({"active": "yes"}), "active"),
        (json!({"colour": "red"}), "colour"),
    ] {
        let response = ops.patch(&webhook, body.clone(), &[]).await;
        let reason = assert_error(
            response,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unprocessable_entity",
        )
        .await;
        assert!(reason.contains(names), "{body}: {reason}");
    }
    assert_eq!(ops.subscription(&webhook).await["name"], "ops", "untouched");
    let other = ops.sibling("B").await;
    let foreign = other.patch(&webhook, json!({"name": "mine"}), &[]).await;
    assert_error(foreign, StatusCode::NOT_FOUND, "not_found").await;
}

#[tokio::test]
async fn a_paused_subscription_holds_its_deliveries_and_sends_them_on_resume() {
    let ops = Ops::new().await;
    let server = receiver(200).await;
    let (webhook, _) = ops
        .subscribe(&hook(&server), "generic", &["finding_high"])
        .await;
    let paused = ops.patch(&webhook, json!({"active": false}), &[]).await;
    let paused: Value = paused.json().await.unwrap();
    assert_eq!(paused["data"]["status"], "paused");
    assert_eq!(paused["data"]["active"], false);

    ops.pass(&[("h1", "high")]).await;
    let worker = ops.worker(3);
    assert_eq!(worker.drain().await.unwrap(), 0, "held");
    assert_eq!(ops.log(&webhook).await[0]["status"], "pending");
    assert!(server.received_requests().await.unwrap().is_empty());

    let resumed: Value = ops
        .patch(&webhook, json!({"active": true}), &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(resumed["data"]["status"], "active");
    assert_eq!(resumed["data"]["active"], true);
    assert_eq!(worker.drain().await.unwrap(), 1, "sent on resume");
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn deliveries_held_past_72_hours_are_cancelled() {
    let ops = Ops::new().await;
    let server = receiver(200).await;
    let (webhook, _) = ops
        .subscribe(&hook(&server), "generic", &["finding_high"])
        .await;
    ops.patch(&webhook, json!({"active": false}), &[]).await;
    ops.pass(&[("h1", "high")]).await;
    ops.sql("UPDATE webhook_subscriptions SET paused_at = now() - interval '73 hours'")
        .await;
    ops.sql("UPDATE webhook_deliveries SET created_at = now() - interval '73 hours'")
        .await;
    let worker = ops.worker(3);
    worker.sweep().await.unwrap();
    let held = &ops.log(&webhook).await[0];
    assert_eq!(held["status"], "cancelled");
    assert!(
        held["lastError"].as_str().unwrap().contains("paused"),
        "{held}"
    );
}

#[tokio::test]
async fn a_subscription_failing_for_days_is_disabled_and_can_be_re_enabled() {
    let ops = Ops::new().await;
    let server = receiver(500).await;
    let (webhook, _) = ops
        .subscribe(&hook(&server), "generic", &["finding_high"])
        .await;
    ops.pass(&[("h1", "high")]).await;
    let worker = ops.worker(5);
    assert_eq!(worker.drain().await.unwrap(), 1);
    worker.sweep().await.unwrap();
    assert_eq!(
        ops.subscription(&webhook).await["status"],
        "active",
        "not for days yet"
    );

    // Every attempt has failed for six days.
    ops.sql("UPDATE webhook_subscriptions SET failing_since = now() - interval '6 days'")
        .await;
    worker.sweep().await.unwrap();
    let disabled = ops.subscription(&webhook).await;
    assert_eq!(disabled["status"], "disabled");
    assert_eq!(disabled["disabledReason"], "failing");
    assert_eq!(disabled["active"], false);
    assert_eq!(ops.log(&webhook).await[0]["status"], "cancelled");
    ops.pass(&[("h2", "high")]).await;
    assert_eq!(
        ops.log(&webhook).await.len(),
        1,
        "nothing queued while disabled"
    );

    let enabled: Value = ops
        .patch(&webhook, json!({"active": true}), &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(enabled["data"]["status"], "active");
    assert_eq!(enabled["data"]["disabledReason"], Value::Null);
    worker.sweep().await.unwrap();
    assert_eq!(
        ops.subscription(&webhook).await["status"],
        "active",
        "the failure clock starts afresh"
    );
}

#[tokio::test]
async fn a_patch_keeps_the_address_rules_of_a_creation() {
    let app = std::sync::Arc::new(crate::support::TestApp::strict_webhooks().await);
    let ops = Ops::on(app, "A").await;
    let (webhook, _) = ops
        .subscribe("https://hooks.example.com/a", "generic", &["finding_high"])
        .await;
    for url in [
        "https://127.0.0.1/x",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/x",
        "https://localhost/x",
        "http://hooks.example.com/x",
        "https://hooks.example.com:22/x",
    ] {
        let response = ops.patch(&webhook, json!({"webhookUrl": url}), &[]).await;
        let reason = assert_error(
            response,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unprocessable_entity",
        )
        .await;
        assert!(reason.contains("webhookUrl"), "{url}: {reason}");
    }
    assert_eq!(
        ops.subscription(&webhook).await["webhookUrl"],
        "https://hooks.example.com/a"
    );
}
