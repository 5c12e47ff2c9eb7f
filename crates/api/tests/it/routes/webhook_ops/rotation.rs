//! `POST /webhooks/{id}/rotate-secret`: during the overlap every delivery is signed with
//! both secrets, so a receiver holding either verifies; afterwards only the new one signs.

use chrono::{DateTime, Utc};
use posture_domain::signature::verify;
use posture_test_support::standard_webhooks::{self, Received};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Ops, header, hook, receiver};
use crate::support::assert_error;

fn received(request: &wiremock::Request) -> Received<'_> {
    Received {
        body: &request.body,
        headers: request
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect(),
    }
}

async fn rotate(ops: &Ops, webhook: &str, body: Value) -> reqwest::Response {
    ops.call(
        Method::POST,
        &format!("/webhooks/{webhook}/rotate-secret"),
        Some(body),
    )
    .await
}

#[tokio::test]
async fn during_the_overlap_receivers_holding_either_secret_verify_and_afterwards_only_the_new() {
    let ops = Ops::new().await;
    let server = receiver(200).await;
    let (webhook, old) = ops
        .subscribe(&hook(&server), "generic", &["finding_high"])
        .await;
    let before = Utc::now();
    let response = rotate(&ops, &webhook, json!({"gracePeriodSeconds": 3600})).await;
    assert_eq!(response.status(), StatusCode::OK);
    let rotated: Value = response.json().await.unwrap();
    let new = rotated["data"]["signingSecret"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(new.starts_with("whsec_") && new != old);
    let until: DateTime<Utc> = rotated["data"]["previousSecretExpiresAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let overlap = (until - before).num_seconds();
    assert!((3595..=3605).contains(&overlap), "{overlap} s");
    let shown = ops
        .json(
            Method::GET,
            &format!("/webhooks/{webhook}"),
            None,
            StatusCode::OK,
        )
        .await;
    assert_eq!(
        shown["data"]["previousSecretExpiresAt"],
        rotated["data"]["previousSecretExpiresAt"]
    );
    assert!(
        !shown.to_string().contains(&new),
        "the secret is shown once"
    );

    ops.pass(&[("h1", "high")]).await;
    let worker = ops.worker(3);
    assert_eq!(worker.drain().await.unwrap(), 1);
    let requests = server.received_requests().await.unwrap();
    let during = &requests[0];
    let entries: Vec<&str> = header(during, "webhook-signature").split(' ').collect();
    assert_eq!(entries.len(), 2, "both secrets sign, the new one first");
    let results =
        standard_webhooks::verify(&[(&old, &received(during), 0), (&new, &received(during), 0)]);
    assert_eq!(
        results,
        vec![Ok(()), Ok(())],
        "a receiver with either secret verifies"
    );
    let seed = header(during, "x-service-signature-256");
    assert!(
        verify(&old, &during.body, seed),
        "the seed's header keeps the old secret"
    );
    assert!(!verify(&new, &during.body, seed));

    // The overlap ends.
    let mut conn = ops.app.db.connection().await;
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(
            "UPDATE webhook_subscriptions SET previous_secret_expires_at = now() - interval '1 second'",
        ),
        &mut conn,
    )
    .await
    .unwrap();
    ops.pass(&[("h2", "high")]).await;
    assert_eq!(worker.drain().await.unwrap(), 1);
    let requests = server.received_requests().await.unwrap();
    let after = &requests[1];
    assert!(
        !header(after, "webhook-signature").contains(' '),
        "one signature"
    );
    let results =
        standard_webhooks::verify(&[(&old, &received(after), 0), (&new, &received(after), 0)]);
    assert!(
        results[0]
            .as_ref()
            .unwrap_err()
            .contains("No matching signature")
    );
    assert_eq!(results[1], Ok(()));
    let seed = header(after, "x-service-signature-256");
    assert!(verify(&new, &after.body, seed) && !verify(&old, &after.body, seed));

    worker.sweep().await.unwrap();
    let forgotten = ops
        .json(
            Method::GET,
            &format!("/webhooks/{webhook}"),
            None,
            StatusCode::OK,
        )
        .await;
    assert_eq!(forgotten["data"]["previousSecretExpiresAt"], Value::Null);
}

#[tokio::test]
async fn no_overlap_switches_at_once_and_a_rotation_inside_an_overlap_needs_force() {
    let ops = Ops::new().await;
    let server = receiver(200).await;
    let (webhook, old) = ops
        .subscribe(&hook(&server), "generic", &["finding_high"])
        .await;
    let first: Value = rotate(&ops, &webhook, json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert!(
        first["data"]["previousSecretExpiresAt"].is_string(),
        "a day by default"
    );
    let refused = rotate(&ops, &webhook, json!({"gracePeriodSeconds": 0})).await;
    let reason = assert_error(refused, StatusCode::CONFLICT, "conflict").await;
    assert!(reason.contains("force"), "{reason}");

    let leaked: Value = rotate(
        &ops,
        &webhook,
        json!({"gracePeriodSeconds": 0, "force": true}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(leaked["data"]["previousSecretExpiresAt"], Value::Null);
    let newest = leaked["data"]["signingSecret"].as_str().unwrap().to_owned();
    ops.pass(&[("h1", "high")]).await;
    assert_eq!(ops.worker(3).drain().await.unwrap(), 1);
    let request = &server.received_requests().await.unwrap()[0];
    let first_secret = first["data"]["signingSecret"].as_str().unwrap();
    let results = standard_webhooks::verify(&[
        (&old, &received(request), 0),
        (first_secret, &received(request), 0),
        (&newest, &received(request), 0),
    ]);
    assert!(
        results[0].is_err() && results[1].is_err(),
        "no older secret signs"
    );
    assert_eq!(results[2], Ok(()));
    assert!(verify(
        &newest,
        &request.body,
        header(request, "x-service-signature-256")
    ));

    for (body, names) in [
        (json!({"gracePeriodSeconds": 604_801}), "gracePeriodSeconds"),
        (json!({"gracePeriodSeconds": -1}), "gracePeriodSeconds"),
        (json!({"secret": "mine"}), "secret"),
    ] {
        let response = rotate(&ops, &webhook, body.clone()).await;
        let reason = assert_error(
            response,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unprocessable_entity",
        )
        .await;
        assert!(reason.contains(names), "{body}: {reason}");
    }
    let stale = ops
        .app
        .client
        .post(
            ops.app
                .url(&format!("/api/v1/webhooks/{webhook}/rotate-secret")),
        )
        .bearer_auth(&ops.key)
        .header("If-Match", "\"v1\"")
        .json(&json!({"force": true}))
        .send()
        .await
        .unwrap();
    assert_error(
        stale,
        StatusCode::PRECONDITION_FAILED,
        "precondition_failed",
    )
    .await;
}
