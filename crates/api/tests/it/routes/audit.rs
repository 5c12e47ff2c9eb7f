//! The audit feed (`GET /audit-events`) and its export, over HTTP: what it shows, to whom,
//! in what order, and its OCSF lines against the OCSF 1.8.0 schema of their classes.

use std::sync::LazyLock;

use posture_domain::{Scope, allow_list::AllowList, console::Actor, ports::ApiKeyRepository};
use reqwest::StatusCode;
use serde_json::Value;

use crate::support::TestApp;

static OCSF: LazyLock<jsonschema::Validator> = LazyLock::new(|| {
    let schema: Value = serde_json::from_str(include_str!("ocsf/audit-1.8.0.schema.json")).unwrap();
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap()
});

/// Lets the feed serve what was written so far.
fn settle(app: &TestApp) {
    app.settle_audit();
}

async fn feed(app: &TestApp, key: &str, query: &str) -> Value {
    app.get_json(&format!("/api/v1/audit-events{query}"), key, StatusCode::OK)
        .await
}

fn types(page: &Value) -> Vec<&str> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_feed_names_actor_target_and_address_oldest_first_once_settled() {
    let app = TestApp::behind_trusted_proxy_with_clock().await;
    let (customer, _) = app.customer("A").await;
    let (_, auditor) = app.key(customer, &[Scope::ReadAudit]).await;
    let (fenced_id, _) = app.key(customer, &[Scope::ReadIdentities]).await;
    app.store
        .set_allow_list(
            Some(customer),
            fenced_id,
            AllowList::parse(&["198.51.100.0/24"]).unwrap(),
            &Actor::Admin {
                subject: "admin-1".into(),
                name: "Ada Admin".into(),
                from: Some("203.0.113.9".parse().unwrap()),
            },
        )
        .await
        .unwrap();
    // Written this instant: not served until it is 5 seconds old.
    assert_eq!(types(&feed(&app, &auditor, "").await), Vec::<&str>::new());
    // That read was the auditor's first use from here: its line is written off the
    // request's path, and is the last of the page once written.
    crate::waits::wait_for(|| async {
        app.audit_lines(customer)
            .await
            .iter()
            .any(|line| line.action == "key.used_from_new_address")
            .then_some(())
    })
    .await;
    settle(&app);
    let page = feed(&app, &auditor, "").await;
    assert_eq!(
        types(&page),
        [
            "key.issued",
            "key.issued",
            "key.allow_list_changed",
            "key.used_from_new_address"
        ]
    );
    let issued = &page["data"][0];
    assert_eq!(issued["actor"]["kind"], "operator");
    assert_eq!(issued["target"]["kind"], "key");
    assert!(issued["sourceIp"].is_null());
    let changed = &page["data"][2];
    assert_eq!(changed["actor"]["kind"], "admin");
    assert_eq!(changed["actor"]["name"], "Ada Admin");
    assert_eq!(changed["actor"]["id"], "admin-1");
    assert_eq!(changed["sourceIp"], "203.0.113.9");
    assert_eq!(changed["target"]["id"], fenced_id.to_string());
    assert!(
        changed["target"]["prefix"]
            .as_str()
            .unwrap()
            .starts_with("svc_")
    );
    assert_eq!(
        changed["detail"],
        "allowed from 198.51.100.0/24 (was any address)"
    );
    let used = &page["data"][3];
    assert_eq!(used["actor"]["kind"], "credential");
    assert_eq!(used["sourceIp"], "127.0.0.1");
    assert_eq!(page["meta"]["hasMore"], false);
    assert_eq!(page["meta"]["nextCursor"], used["id"]);
}

#[tokio::test]
async fn pages_follow_the_cursor_and_filters_narrow_them() {
    let app = TestApp::with_clock().await;
    let (customer, _) = app.customer("A").await;
    let (revoked, _) = app.key(customer, &[Scope::ReadIdentities]).await;
    let (_, auditor) = app.key(customer, &[Scope::ReadAudit]).await;
    app.store
        .revoke_key(None, revoked, &Actor::Operator)
        .await
        .unwrap();
    settle(&app);
    let response = app.get("/api/v1/audit-events?limit=1", &auditor).await;
    let link = response.headers()["link"].to_str().unwrap().to_owned();
    let first: Value = response.json().await.unwrap();
    assert_eq!(types(&first), ["key.issued"]);
    assert_eq!(first["meta"]["hasMore"], true);
    let cursor = first["meta"]["nextCursor"].as_str().unwrap();
    assert!(link.contains(&format!("after={cursor}")), "{link}");
    let second = feed(&app, &auditor, &format!("?limit=1&after={cursor}")).await;
    assert_eq!(types(&second), ["key.issued"]);
    assert_ne!(second["data"][0]["id"], first["data"][0]["id"]);
    let revocations = feed(&app, &auditor, "?type=key.revoked").await;
    assert_eq!(types(&revocations), ["key.revoked"]);
    assert_eq!(revocations["data"][0]["target"]["id"], revoked.to_string());
    let later = (app.now() + chrono::Duration::hours(1)).to_rfc3339();
    let none = feed(
        &app,
        &auditor,
        &format!("?since={}", later.replace('+', "%2B")),
    )
    .await;
    assert_eq!(types(&none), Vec::<&str>::new());
    // An unknown type, a malformed cursor: 400 naming them.
    for (query, field) in [("?type=key.stolen", "type"), ("?after=not-an-id", "after")] {
        let response = app
            .get(&format!("/api/v1/audit-events{query}"), &auditor)
            .await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{query}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["field"], field, "{body}");
    }
}

#[tokio::test]
async fn an_auditor_reads_its_own_customer_only_and_needs_read_audit() {
    let app = TestApp::with_clock().await;
    let (a, _) = app.customer("A").await;
    let (b, _) = app.customer("B").await;
    let (_, auditor_a) = app.key(a, &[Scope::ReadAudit]).await;
    let (_, auditor_b) = app.key(b, &[Scope::ReadAudit]).await;
    let (_, reader) = app
        .key(a, &[Scope::ReadIdentities, Scope::ReadFindings])
        .await;
    settle(&app);
    // Each read is its auditor's first use from here, a line written off the request's
    // path that may or may not land before the read: the issued keys are what is compared.
    let page_a = feed(&app, &auditor_a, "?type=key.issued").await;
    let page_b = feed(&app, &auditor_b, "?type=key.issued").await;
    assert_eq!(page_a["data"].as_array().unwrap().len(), 2);
    assert_eq!(page_b["data"].as_array().unwrap().len(), 1);
    let a_ids: Vec<&Value> = page_a["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["id"])
        .collect();
    assert!(!a_ids.contains(&&page_b["data"][0]["id"]));
    // A's event as B's cursor names nothing of B's: 400, and nothing of A's leaks.
    let cursor = page_a["data"][0]["id"].as_str().unwrap();
    let response = app
        .get(&format!("/api/v1/audit-events?after={cursor}"), &auditor_b)
        .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let export = app
        .get(
            &format!("/api/v1/audit-events/export?after={cursor}"),
            &auditor_b,
        )
        .await;
    assert_eq!(export.status(), StatusCode::BAD_REQUEST);
    for path in ["/api/v1/audit-events", "/api/v1/audit-events/export"] {
        let response = app.get(path, &reader).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"], "insufficient_scope");
    }
}

#[tokio::test]
async fn the_export_writes_every_event_as_ndjson_and_as_valid_ocsf() {
    let app = TestApp::behind_trusted_proxy_with_clock().await;
    let (customer, _) = app.customer("A").await;
    let (_, auditor) = app.key(customer, &[Scope::ReadAudit]).await;
    let (fenced, key) = app
        .key_allowed_from(customer, &[Scope::ReadIdentities], &["198.51.100.0/24"])
        .await;
    // A use from a new address, and a refusal: Authentication events.
    for from in ["198.51.100.7", "203.0.113.5"] {
        app.client
            .get(app.url("/api/v1/identities"))
            .bearer_auth(&key)
            .header("x-forwarded-for", from)
            .send()
            .await
            .unwrap();
    }
    app.store
        .revoke_key(Some(customer), fenced, &Actor::Operator)
        .await
        .unwrap();
    // The auditor's own first use is a line too.
    feed(&app, &auditor, "").await;
    let written = crate::waits::wait_for(|| async {
        let lines = app.audit_lines(customer).await;
        (lines.len() >= 6).then_some(lines.len())
    })
    .await;
    settle(&app);
    let ndjson = app.get("/api/v1/audit-events/export", &auditor).await;
    assert_eq!(ndjson.status(), StatusCode::OK);
    assert_eq!(ndjson.headers()["content-type"], "application/x-ndjson");
    let text = ndjson.text().await.unwrap();
    assert!(text.ends_with('\n'));
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), written);
    let page = feed(&app, &auditor, "?limit=500").await;
    assert_eq!(&Value::from(events.clone()), &page["data"]);
    let ocsf = app
        .get("/api/v1/audit-events/export?format=ocsf", &auditor)
        .await
        .text()
        .await
        .unwrap();
    let mut classes = std::collections::BTreeSet::new();
    for (line, event) in ocsf.lines().zip(&events) {
        let value: Value = serde_json::from_str(line).unwrap();
        let errors: Vec<String> = OCSF.iter_errors(&value).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:?}\n{value}", event["type"]);
        assert_eq!(value["metadata"]["uid"], event["id"]);
        assert_eq!(value["unmapped"]["posture"], *event);
        classes.insert(value["class_uid"].as_u64().unwrap());
        if event["type"] == "key.refused_by_allow_list" {
            assert_eq!(value["class_uid"], 3002);
            assert_eq!(value["status_id"], 2);
            assert_eq!(value["src_endpoint"]["ip"], "203.0.113.5");
        }
    }
    assert_eq!(classes.into_iter().collect::<Vec<_>>(), [3001, 3002]);
    // The schema holds: a line without the account it is about is not an OCSF event.
    let mut broken: Value = serde_json::from_str(ocsf.lines().next().unwrap()).unwrap();
    broken.as_object_mut().unwrap().remove("user");
    assert!(!OCSF.is_valid(&broken));
}

#[tokio::test]
async fn a_flood_of_refusals_from_many_addresses_adds_a_bounded_number_of_events() {
    let app = TestApp::behind_trusted_proxy_with_clock().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app
        .key_allowed_from(customer, &[Scope::ReadIdentities], &["198.51.100.0/24"])
        .await;
    for i in 0..150 {
        for _ in 0..2 {
            let response = app
                .client
                .get(app.url("/api/v1/identities"))
                .bearer_auth(&key)
                .header(
                    "x-forwarded-for",
                    format!("203.0.{}.{}", i / 200, i % 200 + 1),
                )
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::FORBIDDEN);
        }
    }
    let refused = |lines: &[posture_domain::console::AuditEvent]| {
        lines
            .iter()
            .filter(|l| l.action == "key.refused_by_allow_list")
            .count()
    };
    let count = crate::waits::wait_for(|| async {
        let n = refused(&app.audit_lines(customer).await);
        (n >= 100).then_some(n)
    })
    .await;
    // Each instance writes at most 100 (its bound is decided before any write is spawned):
    // no later line can come.
    assert_eq!(count, 100);
    assert_eq!(refused(&app.audit_lines(customer).await), 100);
}

#[tokio::test]
async fn a_line_still_being_written_holds_the_feed_back_until_it_commits() {
    use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _};
    use posture_domain::{audit::AuditFilter, ports::AuditRepository as _};
    let app = TestApp::with_clock().await;
    let (customer, _) = app.customer("A").await;
    let insert = |detail: &str| {
        format!(
            "INSERT INTO console_audit (customer_id, id, actor_kind, actor_subject, actor_name, \
             action, detail) VALUES ('{}', gen_random_uuid(), 'operator', 'operator', \
             'posture operator', 'sso.cleared', '{detail}')",
            customer.customer_id()
        )
    };
    // A transaction writes a line and stays open; another line commits after it (both as the
    // runtime role, as every writer of the log: its transactions are the ones it sees).
    let mut open = AsyncPgConnection::establish(&app.db.runtime_url())
        .await
        .unwrap();
    diesel::sql_query("BEGIN").execute(&mut open).await.unwrap();
    diesel::sql_query(insert("slow"))
        .execute(&mut open)
        .await
        .unwrap();
    let mut other = AsyncPgConnection::establish(&app.db.runtime_url())
        .await
        .unwrap();
    diesel::sql_query(insert("fast"))
        .execute(&mut other)
        .await
        .unwrap();
    let filter = AuditFilter {
        limit: 10,
        ..AuditFilter::default()
    };
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    let details = |page: posture_domain::audit::AuditPage| -> Vec<String> {
        page.events.into_iter().filter_map(|e| e.detail).collect()
    };
    // The committed line is younger than the open transaction: not served yet, or a reader
    // would step past the older line when it commits.
    let page = app
        .store
        .audit_feed(customer, &filter, later)
        .await
        .unwrap();
    assert!(details(page).is_empty());
    diesel::sql_query("COMMIT")
        .execute(&mut open)
        .await
        .unwrap();
    let page = app
        .store
        .audit_feed(customer, &filter, later)
        .await
        .unwrap();
    assert_eq!(details(page), ["slow", "fast"]);
}
