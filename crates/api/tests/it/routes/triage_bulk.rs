//! `POST /findings/triage`: one triage for many findings, per finding what happened, each
//! written finding a `finding_triaged` event of the one change; hostile bodies refused
//! whole.

use posture_domain::Scope;
use posture_test_support::fixtures;
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use crate::support::{TestApp, assert_error};

async fn bulk(app: &TestApp, key: &str, body: &Value) -> Response {
    app.client
        .post(app.url("/api/v1/findings/triage"))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap()
}

fn acknowledge(findings: Value) -> Value {
    json!({"findings": findings, "triage": {"state": "acknowledged", "comment": "INC-42"}})
}

#[tokio::test]
async fn a_bulk_says_per_finding_what_happened_and_is_one_change() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer_with_one_of_each("A").await;
    app.ingest(
        customer,
        &[
            fixtures::finding("f1", &tenant, "critical", "open", "u1"),
            fixtures::finding("f2", &tenant, "low", "open", "u1"),
            fixtures::finding("f3", &tenant, "low", "open", "u1"),
        ],
    )
    .await;
    let (other, _) = app.customer_with_one_of_each("B").await;
    let (_, key) = app
        .key(customer, &[Scope::ReadFindings, Scope::WriteFindings])
        .await;
    let (_, other_key) = app
        .key(other, &[Scope::ReadFindings, Scope::WriteFindings])
        .await;
    let f2 = app.get("/api/v1/findings/f2", &key).await;
    let f2_tag = f2.headers()["etag"].to_str().unwrap().to_owned();
    let answer = bulk(
        &app,
        &key,
        &acknowledge(json!([
            {"id": "f3"},
            {"id": "nope"},
            {"id": "f2", "ifMatch": f2_tag},
            {"id": "f1", "ifMatch": "\"stale\""},
        ])),
    )
    .await;
    assert_eq!(answer.status(), StatusCode::OK);
    let answer: Value = answer.json().await.unwrap();
    let outcomes: Vec<(&str, &str)> = answer["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("f3", "triaged"),
            ("nope", "not_found"),
            ("f2", "triaged"),
            ("f1", "precondition_failed")
        ],
        "in the order asked"
    );
    assert_eq!(
        answer["data"][0]["finding"]["triage"]["state"],
        "acknowledged"
    );
    assert!(answer["data"][1].get("finding").is_none());
    let meta = &answer["meta"];
    assert_eq!(
        (
            &meta["triaged"],
            &meta["notFound"],
            &meta["preconditionFailed"]
        ),
        (&json!(2), &json!(1), &json!(1))
    );
    // f1 is untouched; f2 and f3 read back acknowledged.
    for (id, state) in [
        ("f1", "untriaged"),
        ("f2", "acknowledged"),
        ("f3", "acknowledged"),
    ] {
        let finding = app
            .get_json(&format!("/api/v1/findings/{id}"), &key, StatusCode::OK)
            .await;
        assert_eq!(finding["data"]["triage"]["state"], state, "{id}");
    }
    // One event per finding written, all naming the one change.
    let events = app
        .get_json("/api/v1/events?type=finding_triaged", &key, StatusCode::OK)
        .await;
    let events = events["data"].as_array().unwrap();
    let ids: Vec<&str> = events
        .iter()
        .map(|e| e["finding"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["f2", "f3"]);
    assert!(
        events
            .iter()
            .all(|e| e["analyzerPassId"] == meta["changeId"])
    );
    // Another customer's f1 under the same id is its own: not found from A, untouched.
    let theirs = bulk(&app, &other_key, &acknowledge(json!([{"id": "f2"}]))).await;
    let theirs: Value = theirs.json().await.unwrap();
    assert_eq!(theirs["data"][0]["outcome"], "not_found");
    let f1_of_b = app
        .get_json("/api/v1/findings/f1", &other_key, StatusCode::OK)
        .await;
    assert_eq!(f1_of_b["data"]["triage"]["state"], "untriaged");
}

#[tokio::test]
async fn a_hostile_bulk_is_refused_whole_and_changes_nothing() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer_with_one_of_each("A").await;
    let (_, key) = app
        .key(customer, &[Scope::ReadFindings, Scope::WriteFindings])
        .await;
    let many: Vec<Value> = (0..501).map(|n| json!({"id": format!("f{n}")})).collect();
    for (body, what) in [
        (acknowledge(json!([])), "findings"),
        (acknowledge(Value::Array(many)), "findings"),
        (acknowledge(json!([{"id": "f1"}, {"id": "f1"}])), "twice"),
        (
            acknowledge(json!([{"id": "f1"}, {"id": "a b"}])),
            "findings[1].id",
        ),
        (
            acknowledge(json!([{"id": "f1", "ifMatch": "W/\"weak\""}])),
            "findings[0].ifMatch",
        ),
        (
            json!({"findings": [{"id": "f1"}], "triage": {"state": "dismissed"}}),
            "triage.reason",
        ),
        (
            json!({"findings": [{"id": "f1"}], "triage": {"state": "done"}}),
            "triage.state",
        ),
    ] {
        let reason = assert_error(
            bulk(&app, &key, &body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unprocessable_entity",
        )
        .await;
        assert!(reason.contains(what), "{what}: {reason}");
    }
    let (_, reader) = app.key(customer, &[Scope::ReadFindings]).await;
    assert_error(
        bulk(&app, &reader, &acknowledge(json!([{"id": "f1"}]))).await,
        StatusCode::FORBIDDEN,
        "insufficient_scope",
    )
    .await;
    let f1 = app
        .get_json("/api/v1/findings/f1", &key, StatusCode::OK)
        .await;
    assert_eq!(f1["data"]["triage"]["state"], "untriaged");
    let history = app
        .get_json("/api/v1/findings/f1/triage", &key, StatusCode::OK)
        .await;
    assert_eq!(history["meta"]["total"], 0);
}

/// The bulk's literal path is also a finding's path when the analyzer names a finding
/// `triage`: that finding reads and triages as any other.
#[tokio::test]
async fn a_finding_named_triage_is_still_a_finding() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer_with_one_of_each("A").await;
    app.ingest(
        customer,
        &[fixtures::finding("triage", &tenant, "high", "open", "u1")],
    )
    .await;
    let (_, key) = app
        .key(customer, &[Scope::ReadFindings, Scope::WriteFindings])
        .await;
    let read = app
        .get_json("/api/v1/findings/triage", &key, StatusCode::OK)
        .await;
    assert_eq!(read["data"]["id"], "triage");
    let head = app
        .client
        .head(app.url("/api/v1/findings/triage"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    let patched = app
        .client
        .patch(app.url("/api/v1/findings/triage"))
        .bearer_auth(&key)
        .json(&json!({"triage": {"state": "acknowledged"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), StatusCode::OK);
    let history = app
        .get_json("/api/v1/findings/triage/triage", &key, StatusCode::OK)
        .await;
    assert_eq!(history["meta"]["total"], 1);
    let answer = bulk(&app, &key, &acknowledge(json!([{"id": "triage"}]))).await;
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(answer["data"][0]["outcome"], "triaged");
    let delete = app
        .client
        .delete(app.url("/api/v1/findings/triage"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), StatusCode::METHOD_NOT_ALLOWED);
    // `Allow` is the contract's list for the path, not the shadowed routes' methods.
    assert_eq!(delete.headers()["allow"], "POST");
    let options = app
        .client
        .request(reqwest::Method::OPTIONS, app.url("/api/v1/findings/export"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(options.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(options.headers()["allow"], "GET, HEAD");
}

#[tokio::test]
async fn a_customers_triage_writes_share_a_budget_of_120_a_minute() {
    let app = TestApp::with_clock().await;
    let (customer, tenant) = app.customer_with_one_of_each("A").await;
    app.ingest(
        customer,
        &[fixtures::finding("f1", &tenant, "high", "open", "u1")],
    )
    .await;
    let scopes = [Scope::ReadFindings, Scope::WriteFindings];
    let (_, soar) = app.key(customer, &scopes).await;
    let (_, tines) = app.key(customer, &scopes).await;
    let (other, other_tenant) = app.customer_with_one_of_each("B").await;
    app.ingest(
        other,
        &[fixtures::finding("f1", &other_tenant, "high", "open", "u1")],
    )
    .await;
    let (_, theirs) = app.key(other, &scopes).await;
    let one = acknowledge(json!([{"id": "f1"}]));
    let single = json!({"triage": {"state": "acknowledged"}});
    let patch = |key: &str| {
        app.client
            .patch(app.url("/api/v1/findings/f1"))
            .bearer_auth(key)
            .json(&single)
            .send()
    };
    // Both keys together, a bulk and a PATCH each counting once.
    for n in 0..60 {
        assert_eq!(
            bulk(&app, &soar, &one).await.status(),
            StatusCode::OK,
            "{n}"
        );
        assert_eq!(patch(&tines).await.unwrap().status(), StatusCode::OK, "{n}");
    }
    let refused = bulk(&app, &tines, &one).await;
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    let reason = assert_error(refused, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    assert!(reason.contains("120 a minute per customer"), "{reason}");
    assert_error(
        patch(&soar).await.unwrap(),
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
    )
    .await;
    // Refused writes wrote nothing: 120 triage events of f1 (its history keeps the newest
    // 100 records).
    let events = app
        .get_json(
            "/api/v1/events?type=finding_triaged&limit=500",
            &soar,
            StatusCode::OK,
        )
        .await;
    assert_eq!(events["data"].as_array().unwrap().len(), 120);
    let history = app
        .get_json("/api/v1/findings/f1/triage?limit=1", &soar, StatusCode::OK)
        .await;
    assert_eq!(history["meta"]["total"], 100);
    // Another customer's budget is its own; a minute later A's is whole again.
    assert_eq!(bulk(&app, &theirs, &one).await.status(), StatusCode::OK);
    app.clock()
        .advance(std::time::Duration::from_secs(retry_after));
    assert_eq!(bulk(&app, &soar, &one).await.status(), StatusCode::OK);
}

/// The largest bulk the contract allows, as a pretty-printing client writes it with every
/// non-ASCII character escaped, fits the body limit.
#[tokio::test]
async fn the_largest_bulk_the_contract_allows_is_not_too_large() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer_with_one_of_each("A").await;
    let key = app.key_with_every_scope(customer).await;
    let findings: Vec<Value> = (0..500)
        .map(|i| {
            json!({"id": format!("{i:03}{}", "x".repeat(125)),
                   "ifMatch": format!("\"{}\"", "a".repeat(198))})
        })
        .collect();
    let body = json!({"findings": findings,
                      "triage": {"state": "acknowledged", "comment": "\u{1d11e}".repeat(2000)}});
    let text = serde_json::to_string_pretty(&body)
        .unwrap()
        .replace('\u{1d11e}', "\\ud834\\udd1e");
    assert!(text.len() > 200_000, "{} bytes", text.len());
    let response = app
        .client
        .post(app.url("/api/v1/findings/triage"))
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body(text)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let answer: Value = response.json().await.unwrap();
    let items = answer["data"].as_array().unwrap();
    assert_eq!(items.len(), 500);
    assert!(
        items.iter().all(|item| item["outcome"] == "not_found"),
        "{}",
        items[0]
    );
}
