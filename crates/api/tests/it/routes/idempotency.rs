//! `Idempotency-Key` on the POSTs that create or act: a retry answers the first answer
//! again and acts once; another request with the key is 422, one while the first runs 409;
//! keys are per API key.

use chrono::{Duration, Utc};
use posture_domain::{
    Scope,
    idempotency::{Claim, Fingerprint, IdempotencyKey},
    ports::IdempotencyRepository,
};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use crate::support::{TestApp, assert_error};

fn subscription(name: &str) -> Value {
    json!({"name": name, "webhookUrl": "https://hooks.example.com/in",
           "webhookType": "generic", "eventTypes": ["finding_high"]})
}

async fn create(app: &TestApp, key: &str, idempotency: Option<&str>, body: &Value) -> Response {
    let mut request = app
        .client
        .post(app.url("/api/v1/webhooks"))
        .bearer_auth(key)
        .json(body);
    if let Some(value) = idempotency {
        request = request.header("idempotency-key", value);
    }
    request.send().await.unwrap()
}

async fn subscriptions(app: &TestApp, key: &str) -> usize {
    app.get_json("/api/v1/webhooks", key, StatusCode::OK).await["data"]
        .as_array()
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_retried_create_answers_the_first_answer_and_creates_nothing_twice() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ManageWebhooks]).await;
    let first = create(&app, &key, Some("create-1"), &subscription("a")).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let location = first.headers()["location"].clone();
    let first: Value = first.json().await.unwrap();
    let secret = first["data"]["signingSecret"].as_str().unwrap().to_owned();
    // The same request again, quoted as the draft's structured field this time.
    let retry = create(&app, &key, Some("\"create-1\""), &subscription("a")).await;
    assert_eq!(retry.status(), StatusCode::CREATED);
    assert_eq!(retry.headers()["idempotent-replayed"], "true");
    assert_eq!(retry.headers()["location"], location);
    assert!(retry.headers().contains_key("x-ratelimit-remaining"));
    let retry: Value = retry.json().await.unwrap();
    assert_eq!(retry, first, "the same subscription, its secret included");
    assert_eq!(retry["data"]["signingSecret"], secret.as_str());
    assert_eq!(subscriptions(&app, &key).await, 1, "created once");
    // Without a key, the same body creates again: the header is what makes it safe.
    let plain = create(&app, &key, None, &subscription("a")).await;
    assert_eq!(plain.status(), StatusCode::CREATED);
    assert_eq!(subscriptions(&app, &key).await, 2);
    // The answer is kept sealed: the secret is nowhere in the table in clear.
    let clear = app
        .db
        .execute(&format!(
            "SELECT 1 FROM idempotency_keys WHERE position('{secret}'::bytea IN body) > 0"
        ))
        .await;
    assert_eq!(clear, 0);
}

#[tokio::test]
async fn a_key_used_for_another_request_is_refused_and_keys_are_per_api_key() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ManageWebhooks]).await;
    let (_, other_key) = app.key(customer, &[Scope::ManageWebhooks]).await;
    let first = create(&app, &key, Some("k"), &subscription("a")).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let refused = create(&app, &key, Some("k"), &subscription("b")).await;
    let reason = assert_error(
        refused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "unprocessable_entity",
    )
    .await;
    assert!(reason.contains("Idempotency-Key"), "{reason}");
    // The same key on another route is another request too.
    let id = {
        let list = app.get_json("/api/v1/webhooks", &key, StatusCode::OK).await;
        list["data"][0]["id"].as_str().unwrap().to_owned()
    };
    let rotate = app
        .client
        .post(app.url(&format!("/api/v1/webhooks/{id}/rotate-secret")))
        .bearer_auth(&key)
        .header("idempotency-key", "k")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_error(
        rotate,
        StatusCode::UNPROCESSABLE_ENTITY,
        "unprocessable_entity",
    )
    .await;
    // Another API key's "k" is its own.
    let other = create(&app, &other_key, Some("k"), &subscription("b")).await;
    assert_eq!(other.status(), StatusCode::CREATED);
    assert!(other.headers().get("idempotent-replayed").is_none());
    assert_eq!(subscriptions(&app, &key).await, 2);
    // A key that is no key is a 400 and creates nothing.
    for bad in ["k".repeat(256), "a b".to_owned(), String::new()] {
        let response = create(&app, &key, Some(&bad), &subscription("c")).await;
        assert_error(response, StatusCode::BAD_REQUEST, "invalid_request").await;
    }
    assert_eq!(subscriptions(&app, &key).await, 2);
}

#[tokio::test]
async fn a_retry_while_the_first_runs_is_a_conflict_until_the_first_stops_holding_it() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (key_id, key) = app.key(customer, &[Scope::ManageWebhooks]).await;
    let body = serde_json::to_vec(&subscription("a")).unwrap();
    let fingerprint = Fingerprint::of("POST", "/api/v1/webhooks", &body);
    let idempotency = IdempotencyKey::parse(b"running").unwrap();
    let post = || {
        app.client
            .post(app.url("/api/v1/webhooks"))
            .bearer_auth(&key)
            .header("content-type", "application/json")
            .header("idempotency-key", "running")
            .body(body.clone())
            .send()
    };
    // A first request holds the key (as an instance running it would).
    let claim = app
        .store
        .claim_idempotency_key(customer, key_id, &idempotency, &fingerprint)
        .await
        .unwrap();
    let Claim::Run(first) = claim else {
        panic!("an unused key is the first request's: {claim:?}")
    };
    assert_error(post().await.unwrap(), StatusCode::CONFLICT, "conflict").await;
    assert_eq!(subscriptions(&app, &key).await, 0);
    // A first request that stopped without an answer holds it a minute, then a retry runs.
    let stop_holding = "UPDATE idempotency_keys SET running_until = now() - interval '1 second'";
    app.db.execute(stop_holding).await;
    let retry = app
        .store
        .claim_idempotency_key(customer, key_id, &idempotency, &fingerprint)
        .await
        .unwrap();
    let Claim::Run(retry) = retry else {
        panic!("a key held past its minute is the retry's: {retry:?}")
    };
    // The first request, back late, cannot free the key the retry now holds, nor renew
    // its hold.
    app.store
        .release_idempotency_key(customer, key_id, &idempotency, first)
        .await
        .unwrap();
    assert_error(post().await.unwrap(), StatusCode::CONFLICT, "conflict").await;
    let held_until = "SELECT count(*) AS n FROM idempotency_keys \
                      WHERE running_until > now() + interval '50 seconds'";
    app.db.execute(stop_holding).await;
    app.store
        .extend_idempotency_hold(customer, key_id, &idempotency, first)
        .await
        .unwrap();
    assert_eq!(app.db.count(held_until).await, 0, "only the holder renews");
    // The retry, still running, renews its hold: a minute more, on the database's clock.
    app.store
        .extend_idempotency_hold(customer, key_id, &idempotency, retry)
        .await
        .unwrap();
    assert_eq!(app.db.count(held_until).await, 1, "the holder renews");
    assert_error(post().await.unwrap(), StatusCode::CONFLICT, "conflict").await;
    app.store
        .release_idempotency_key(customer, key_id, &idempotency, retry)
        .await
        .unwrap();
    let ran = post().await.unwrap();
    assert_eq!(ran.status(), StatusCode::CREATED);
    assert!(ran.headers().get("idempotent-replayed").is_none());
    assert_eq!(subscriptions(&app, &key).await, 1);
    let replayed = post().await.unwrap();
    assert_eq!(replayed.status(), StatusCode::CREATED);
    assert_eq!(replayed.headers()["idempotent-replayed"], "true");
    assert_eq!(subscriptions(&app, &key).await, 1);
    // Forgotten after 24 hours: the same key is new again.
    app.db
        .execute("UPDATE idempotency_keys SET kept_until = now() - interval '1 second'")
        .await;
    let later = Utc::now() + Duration::hours(25);
    let claim = app
        .store
        .claim_idempotency_key(customer, key_id, &idempotency, &fingerprint)
        .await
        .unwrap();
    assert!(matches!(claim, Claim::Run(_)), "{claim:?}");
    // The sweep forgets it (in batches): a key past its day is gone from the table.
    assert_eq!(
        app.store
            .purge_idempotency_keys(later + Duration::hours(25), 1)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        app.store
            .purge_idempotency_keys(later + Duration::hours(25), 1)
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn a_refusal_that_would_be_the_same_is_kept_and_one_that_may_change_is_not() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ManageWebhooks]).await;
    let invalid = json!({"name": "a", "webhookUrl": "ftp://nowhere", "webhookType": "generic",
                         "eventTypes": ["finding_high"]});
    let first = create(&app, &key, Some("bad"), &invalid).await;
    assert_eq!(first.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let again = create(&app, &key, Some("bad"), &invalid).await;
    assert_eq!(again.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    // A test delivery of an unknown subscription is a 404 kept; the test's own rate limit
    // (429) is not kept: a retry after it runs again.
    let unknown = app
        .client
        .post(app.url("/api/v1/webhooks/0193f2a0-7c1e-7000-8000-000000000001/test"))
        .bearer_auth(&key)
        .header("idempotency-key", "t")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    let kept = app
        .db
        .execute("SELECT 1 FROM idempotency_keys WHERE idempotency_key = 't' AND status = 404")
        .await;
    assert_eq!(kept, 1);
}

#[tokio::test]
async fn a_bulk_of_500_findings_with_the_longest_comment_is_replayed_not_written_twice() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer_with_one_of_each("A").await;
    let findings: Vec<Value> = (0..500)
        .map(|i| {
            posture_test_support::fixtures::finding(
                &format!("f-{i:03}"),
                &tenant,
                "high",
                "open",
                "u1",
            )
        })
        .collect();
    app.ingest(customer, &findings).await;
    let (_, key) = app
        .key(customer, &[Scope::ReadFindings, Scope::WriteFindings])
        .await;
    let ids: Vec<Value> = (0..500)
        .map(|i| json!({"id": format!("f-{i:03}")}))
        .collect();
    // 2,000 characters of two bytes each: the answer is over 2 MiB.
    let body =
        json!({"findings": ids, "triage": {"state": "acknowledged", "comment": "é".repeat(2000)}});
    let post = || {
        app.client
            .post(app.url("/api/v1/findings/triage"))
            .bearer_auth(&key)
            .header("idempotency-key", "big")
            .json(&body)
            .send()
    };
    let first = post().await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first = first.bytes().await.unwrap();
    assert!(first.len() > 2 << 20, "{} bytes", first.len());
    let again = post().await.unwrap();
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.bytes().await.unwrap(), first);
    // Kept compressed: the comment once, not 500 times.
    #[derive(diesel::QueryableByName)]
    struct Kept {
        #[diesel(sql_type = diesel::sql_types::Integer)]
        bytes: i32,
    }
    let kept: Kept = diesel_async::RunQueryDsl::get_result(
        diesel::sql_query("SELECT length(body) AS bytes FROM idempotency_keys"),
        &mut app.db.connection().await,
    )
    .await
    .unwrap();
    assert!(
        (kept.bytes as usize) * 10 < first.len(),
        "{} bytes kept of {}",
        kept.bytes,
        first.len()
    );
    let history = app
        .get_json("/api/v1/findings/f-499/triage", &key, StatusCode::OK)
        .await;
    assert_eq!(history["meta"]["total"], 1, "written once");
}
