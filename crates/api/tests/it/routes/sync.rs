//! Keeping in sync: `modifiedAt` moves only when a pass changes what the API serves,
//! `modifiedSince` and `order=modified` read what changed in the order it changed, and a
//! client that stores `meta.syncedThrough` and sends it back misses nothing and reads nothing
//! twice, even while passes commit during its reads.

use std::collections::{BTreeMap, BTreeSet};

use posture_domain::ports::DataChanges;
use posture_test_support::fixtures::{finding, identity, recommendation};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::TestApp;

fn rows(body: &Value) -> &Vec<Value> {
    body["data"].as_array().unwrap()
}

fn by_id<'a>(body: &'a Value, id: &str) -> &'a Value {
    rows(body)
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {body}"))
}

fn time(value: &Value) -> chrono::DateTime<chrono::Utc> {
    value.as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn modified_at_moves_only_when_a_pass_changes_what_the_api_serves() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let records = vec![
        identity("u1", &t, "Ada"),
        identity("u2", &t, "Grace"),
        finding("f1", &t, "high", "open", "u1"),
        finding("f2", &t, "high", "open", "u2"),
        recommendation("r1", &t, "u1"),
        recommendation("r2", &t, "u2"),
    ];
    app.ingest(customer, &records).await;
    let get = |path: &'static str| app.get_json(path, &key, StatusCode::OK);
    let (findings, identities, roles) = (
        get("/api/v1/findings").await,
        get("/api/v1/identities").await,
        get("/api/v1/roles").await,
    );
    let first = time(&findings["meta"]["syncedThrough"]);
    for body in [&findings, &identities, &roles] {
        assert_eq!(time(&body["meta"]["syncedThrough"]), first);
        for row in rows(body) {
            assert_eq!(
                time(&row["modifiedAt"]),
                first,
                "a pass's rows share one value"
            );
            // The pass that wrote a row reported it at the same time: its updatedAt (or
            // lastSeenAt) is never earlier than its modifiedAt.
            let reported = row.get("updatedAt").or_else(|| row.get("lastSeenAt"));
            assert_eq!(time(reported.unwrap()), first, "{row}");
        }
    }

    // The same records again: reported (updatedAt, lastSeenAt move), not modified.
    app.ingest(customer, &records).await;
    let findings = get("/api/v1/findings").await;
    let second = time(&findings["meta"]["syncedThrough"]);
    assert!(second > first, "syncedThrough moves on, never backwards");
    let f1 = by_id(&findings, "f1");
    assert_eq!(time(&f1["modifiedAt"]), first);
    assert!(
        time(&f1["updatedAt"]) > time(&f1["modifiedAt"]),
        "reported again: {f1}"
    );
    for body in [get("/api/v1/identities").await, get("/api/v1/roles").await] {
        assert!(
            rows(&body).iter().all(|r| time(&r["modifiedAt"]) == first),
            "{body}"
        );
    }

    // One field of each kind changes: only those rows move, to the new pass's time.
    let mut changed = records.clone();
    changed[1]["roleAssignments"] =
        json!([{"roleName": "Global Administrator", "scope": "/", "assignmentType": "eligible"}]);
    changed[3]["severity"] = json!("critical");
    changed[5]["removedActions"] = json!(["*", "Microsoft.Authorization/*"]);
    app.ingest(customer, &changed).await;
    let findings = get("/api/v1/findings").await;
    let third = time(&findings["meta"]["syncedThrough"]);
    assert!(third > second);
    assert_eq!(time(&by_id(&findings, "f1")["modifiedAt"]), first);
    assert_eq!(time(&by_id(&findings, "f2")["modifiedAt"]), third);
    let identities = get("/api/v1/identities").await;
    assert_eq!(time(&by_id(&identities, "u1")["modifiedAt"]), first);
    assert_eq!(
        time(&by_id(&identities, "u2")["modifiedAt"]),
        third,
        "a change of role assignments is a change of the identity"
    );
    let roles = get("/api/v1/roles").await;
    assert_eq!(time(&by_id(&roles, "r1")["modifiedAt"]), first);
    assert_eq!(time(&by_id(&roles, "r2")["modifiedAt"]), third);
}

#[tokio::test]
async fn modified_since_lists_only_later_changes_in_the_order_they_were_made() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let mut records: Vec<Value> = vec![identity("u1", &t, "Ada")];
    for i in 0..6 {
        records.push(finding(&format!("f{i}"), &t, "low", "open", "u1"));
    }
    app.ingest(customer, &records).await;
    let before = app.get_json("/api/v1/findings", &key, StatusCode::OK).await;
    let watermark = before["meta"]["syncedThrough"].as_str().unwrap().to_owned();
    // Two later passes: f4 then f1 change.
    for (i, title) in [(5, "f4 renamed"), (2, "f1 renamed")] {
        records[i]["title"] = json!(title);
        app.ingest(customer, &records).await;
    }
    for path in ["/api/v1/findings", "/api/v1/findings?order=modified"] {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = format!("{path}{sep}modifiedSince={}", urlencode(&watermark));
        let body = app.get_json(&url, &key, StatusCode::OK).await;
        let ids: Vec<&str> = rows(&body)
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["f4", "f1"], "{url}");
        assert_eq!(body["meta"]["total"], 2);
    }
    // order=modified alone: everything, oldest change first, then id.
    let body = app
        .get_json("/api/v1/findings?order=modified", &key, StatusCode::OK)
        .await;
    let ids: Vec<&str> = rows(&body)
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["f0", "f2", "f3", "f5", "f4", "f1"]);
    assert_eq!(body["meta"]["total"], 6);
    // With the list's own order asked for: the changed rows, most severe first, then
    // newest detection, then id (all equal here but the id).
    let body = app
        .get_json(
            &format!(
                "/api/v1/findings?order=default&modifiedSince={}",
                urlencode(&watermark)
            ),
            &key,
            StatusCode::OK,
        )
        .await;
    let ids: Vec<&str> = rows(&body)
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["f1", "f4"]);
    assert_eq!(body["meta"]["total"], 2);
}

#[tokio::test]
async fn the_export_takes_modified_since_and_says_what_to_send_next() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let mut records: Vec<Value> = vec![identity("u1", &t, "Ada")];
    for i in 0..4 {
        records.push(finding(&format!("f{i}"), &t, "low", "open", "u1"));
    }
    app.ingest(customer, &records).await;
    let response = app.get("/api/v1/findings/export", &key).await;
    let watermark = response.headers()["x-synced-through"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(response.text().await.unwrap().lines().count(), 4);
    records[3]["status"] = json!("resolved");
    app.ingest(customer, &records).await;
    let response = app
        .get(
            &format!(
                "/api/v1/findings/export?modifiedSince={}",
                urlencode(&watermark)
            ),
            &key,
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["x-total-count"], "1");
    let next = time(&json!(
        response.headers()["x-synced-through"].to_str().unwrap()
    ));
    assert!(next > time(&json!(watermark)));
    let body = response.text().await.unwrap();
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["id"], "f2");
    assert_eq!(time(&lines[0]["modifiedAt"]), next);
}

fn urlencode(text: &str) -> String {
    text.replace('+', "%2B").replace(':', "%3A")
}

/// One sync, as a connector runs it: read everything modified since `watermark`, page by
/// page with cursors, and return the rows and the new watermark.
async fn sync_once(
    app: &TestApp,
    key: &str,
    watermark: Option<&str>,
) -> (Vec<Value>, Option<String>, usize) {
    let mut url = match watermark {
        Some(w) => format!("/api/v1/findings?limit=7&modifiedSince={}", urlencode(w)),
        None => "/api/v1/findings?limit=7&order=modified".to_owned(),
    };
    let mut read = Vec::new();
    let mut requests = 0;
    loop {
        let body = app.get_json(&url, key, StatusCode::OK).await;
        requests += 1;
        read.extend(rows(&body).iter().cloned());
        match body["meta"]["nextCursor"].as_str() {
            Some(cursor) => {
                let base = url.split("&after=").next().unwrap().to_owned();
                url = format!("{base}&after={cursor}");
            }
            None => {
                let through = body["meta"]["syncedThrough"].as_str().map(str::to_owned);
                return (read, through, requests);
            }
        }
    }
}

/// Takes one sync's rows into the client's copy (id to title and `modifiedAt`), checking
/// what the client relies on: no row twice in a sync, each after the watermark sent and
/// within the `syncedThrough` received, and a row read again only when it changed. Returns
/// how many rows were read again.
fn absorb(
    store: &mut BTreeMap<String, (String, String)>,
    watermark: Option<&str>,
    read: &[Value],
    through: Option<&str>,
) -> usize {
    let mut seen = BTreeSet::new();
    let mut rereads = 0;
    for row in read {
        let id = row["id"].as_str().unwrap().to_owned();
        assert!(seen.insert(id.clone()), "{id} read twice in one sync");
        let modified = row["modifiedAt"].as_str().unwrap().to_owned();
        if let Some(w) = watermark {
            assert!(
                time(&json!(modified)) > time(&json!(w)),
                "{id} not after the watermark"
            );
        }
        if let Some(t) = through {
            assert!(
                time(&json!(modified)) <= time(&json!(t)),
                "{id} after syncedThrough"
            );
        }
        if let Some((_, before)) = store.get(&id) {
            assert!(
                time(&json!(modified)) > time(&json!(before)),
                "{id} read again unchanged"
            );
            rereads += 1;
        }
        store.insert(id, (row["title"].as_str().unwrap().to_owned(), modified));
    }
    rereads
}

#[tokio::test]
async fn a_syncing_client_misses_nothing_and_reads_nothing_twice_while_passes_commit() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    const PASSES: usize = 25;
    // Each pass adds one finding: 30 at first, 54 at the end.
    const FINDINGS: usize = 30 + PASSES - 1;
    let record = |i: usize, version: usize| {
        let mut f = finding(&format!("f{i:02}"), &t, "low", "open", "u1");
        f["title"] = json!(format!("f{i:02} v{version}"));
        f
    };
    // Passes keep the versions they last gave each finding, so "unchanged" is unchanged.
    let mut versions = vec![0usize; FINDINGS];
    let mut passes: Vec<Vec<Value>> = Vec::new();
    for version in 0..PASSES {
        let mut records = vec![identity("u1", &t, "Ada")];
        for (i, v) in versions
            .iter_mut()
            .enumerate()
            .take(FINDINGS.min(30 + version))
        {
            if (i * 7 + version) % 5 == 0 {
                *v = version;
            }
            records.push(record(i, *v));
        }
        passes.push(records);
    }
    // Word of each pass, from before the first: what the final syncs wait on.
    let mut changes = app.store.subscribe(customer.customer_id());
    let done = std::sync::atomic::AtomicBool::new(false);
    let writer = async {
        for records in &passes {
            app.ingest(customer, records).await;
            // Room for the client to sync between passes as well as during them.
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
    };
    let reader = async {
        let mut store: BTreeMap<String, (String, String)> = BTreeMap::new();
        let mut watermark: Option<String> = None;
        let mut syncs = 0;
        let mut rereads = 0;
        loop {
            let (read, through, _) = sync_once(&app, &key, watermark.as_deref()).await;
            syncs += 1;
            rereads += absorb(&mut store, watermark.as_deref(), &read, through.as_deref());
            watermark = through.or(watermark);
            if done.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            tokio::task::yield_now().await;
        }
        (store, watermark, syncs, rereads)
    };
    let ((), (mut store, watermark, syncs, rereads)) = tokio::join!(writer, reader);
    assert!(
        syncs > 3,
        "the client synced {syncs} times while the passes ran"
    );
    assert!(rereads > 0, "changed findings were read again");
    let truth = app
        .get_json("/api/v1/findings?limit=500", &key, StatusCode::OK)
        .await;
    assert_eq!(rows(&truth).len(), FINDINGS);
    // Syncs after the passes, until `syncedThrough` covers the last one: then the client's
    // copy is the server's data. The bound is kept per process and forgotten on the
    // database's notification of a pass, which can come after the pass's commit (it did on a
    // loaded machine); until then a sync reports the pass before, and reads up to it. The
    // cache is forgotten before the word goes out, so a sync after the last pass's word sees
    // it; word of an earlier pass only costs one more sync.
    let newest = rows(&truth)
        .iter()
        .map(|row| time(&row["modifiedAt"]))
        .max()
        .unwrap();
    // One deadline for all of it: `changed` also wakes by itself while the cache is not
    // listening, so a bound that never moves must fail here, not wait forever.
    let caught_up = async {
        let mut watermark = watermark;
        loop {
            let (read, through, _) = sync_once(&app, &key, watermark.as_deref()).await;
            absorb(&mut store, watermark.as_deref(), &read, through.as_deref());
            watermark = through.or(watermark);
            if watermark
                .as_ref()
                .is_some_and(|w| time(&json!(w)) >= newest)
            {
                return;
            }
            changes.changed().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), caught_up)
        .await
        .expect("syncedThrough never reached the last pass");
    for row in rows(&truth) {
        let id = row["id"].as_str().unwrap();
        let (title, _) = store.get(id).unwrap_or_else(|| panic!("{id} missed"));
        assert_eq!(
            title,
            row["title"].as_str().unwrap(),
            "{id}: a change missed"
        );
    }
}
