//! Read replicas (`POSTURE_DATABASE_READ_URL`) against a real streaming standby: a cluster of
//! the test's own and a hot standby of it made with `pg_basebackup`, both on loopback.

use std::time::{Duration, Instant};

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use posture_domain::{Scope, console::Actor, ports::ApiKeyRepository};
use posture_test_support::{fixtures, redis_url, servers::PostgresServer, waits::wait_for};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};

use crate::{rate_limits::ApiProcess, support::TestApp};

/// The bound of the test's server: long enough for the reads that must come from the
/// paused replica (a pass, a revocation and a few requests, on a machine busy with the
/// rest of the suite), short enough to wait for.
const MAX_LAG: Duration = Duration::from_secs(8);
const CHECK_EVERY: Duration = Duration::from_millis(100);

async fn execute(url: &str, sql: &str) {
    use diesel_async::SimpleAsyncConnection as _;
    let mut conn = AsyncPgConnection::establish(url).await.unwrap();
    conn.batch_execute(sql).await.unwrap();
}

/// Waits until the standby has replayed everything the primary wrote so far.
pub(crate) async fn wait_for_replay(primary: &str, standby: &str) {
    #[derive(diesel::QueryableByName)]
    struct Lsn {
        #[diesel(sql_type = diesel::sql_types::Text)]
        lsn: String,
    }
    #[derive(diesel::QueryableByName)]
    struct CaughtUp {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        caught_up: bool,
    }
    let mut conn = AsyncPgConnection::establish(primary).await.unwrap();
    let written: Lsn = diesel::sql_query("SELECT pg_current_wal_lsn()::text AS lsn")
        .get_result(&mut conn)
        .await
        .unwrap();
    let conn = tokio::sync::Mutex::new(AsyncPgConnection::establish(standby).await.unwrap());
    wait_for(
        "the standby catching up",
        Duration::from_secs(20),
        || async {
            let replayed: CaughtUp = diesel::sql_query(
                "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false) AS caught_up",
            )
            .bind::<diesel::sql_types::Text, _>(&written.lsn)
            .get_result(&mut *conn.lock().await)
            .await
            .unwrap();
            replayed.caught_up.then_some(())
        },
    )
    .await;
}

/// POSTs a webhook subscription (a write) to the server at `base`.
pub(crate) async fn create_subscription(http: &Client, base: &str, key: &str) -> reqwest::Response {
    http.post(format!("{base}/api/v1/webhooks"))
        .bearer_auth(key)
        .json(
            &json!({"name": "SIEM", "webhookUrl": "https://hooks.example.com/posture",
                      "webhookType": "generic", "eventTypes": ["finding_high"]}),
        )
        .send()
        .await
        .unwrap()
}

/// The value of one series of the server's `/metrics` (`None`: not exported).
async fn metric(http: &Client, base: &str, series: &str) -> Option<f64> {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|value| value.trim().parse().unwrap())
}

/// Waits until the first replica's usability is `usable`; returns how long that took.
async fn wait_for_usable(http: &Client, base: &str, usable: bool) -> Duration {
    let start = Instant::now();
    let (want, what) = match usable {
        true => (1.0, "the replica becoming usable"),
        false => (0.0, "the replica being skipped"),
    };
    wait_for(what, Duration::from_secs(20), || async {
        let usable = metric(http, base, "posture_db_replica_usable{replica=\"1\"}").await;
        (usable == Some(want)).then_some(())
    })
    .await;
    start.elapsed()
}

fn findings(tenant: &str, count: usize) -> Vec<Value> {
    let mut records = vec![fixtures::identity("u1", tenant, "Ada")];
    records.extend(
        (1..=count).map(|i| fixtures::finding(&format!("f-{i}"), tenant, "high", "open", "u1")),
    );
    records
}

/// A cluster of the test's own and a hot standby of it, a customer with 3 findings, and
/// `posture-api serve` reading the standby ([`MAX_LAG`], checked every [`CHECK_EVERY`]).
struct WithReplica {
    primary: PostgresServer,
    standby: PostgresServer,
    app: TestApp,
    customer: posture_domain::CustomerScope,
    tenant: String,
    api: ApiProcess,
}

impl WithReplica {
    async fn start() -> Self {
        let dir =
            std::env::temp_dir().join(format!("posture-replica-{}", uuid::Uuid::new_v4().simple()));
        let primary = PostgresServer::start(&dir.join("primary"), "").unwrap();
        let standby = primary.start_standby(&dir.join("standby")).unwrap();
        let app = TestApp::on_server(&primary.url).await;
        let (customer, tenant) = app.customer("A").await;
        app.ingest(customer, &findings(&tenant, 3)).await;
        let standby_addr = ([127, 0, 0, 1], standby.port()).into();
        let api = ApiProcess::spawn_with(
            &app.db,
            &redis_url(),
            10_000,
            &[
                (
                    "POSTURE_DATABASE_READ_URL",
                    app.db.url_through(standby_addr).as_str(),
                ),
                (
                    "POSTURE_REPLICA_MAX_LAG_MS",
                    &MAX_LAG.as_millis().to_string(),
                ),
                (
                    "POSTURE_REPLICA_CHECK_MS",
                    &CHECK_EVERY.as_millis().to_string(),
                ),
            ],
        );
        Self {
            primary,
            standby,
            app,
            customer,
            tenant,
            api,
        }
    }
}

#[tokio::test]
async fn reads_come_from_a_replica_that_keeps_up_and_from_the_primary_once_it_lags() {
    if posture_test_support::citus::single_node_only(
        "a streaming standby of one PostgreSQL node (on Citus: docs/operations.md, \"Running on Citus\", read replicas)",
    ) {
        return;
    }
    let WithReplica {
        primary,
        standby,
        app,
        customer,
        tenant,
        api,
    } = WithReplica::start().await;
    let (_, key) = app
        .key(customer, &[Scope::ReadFindings, Scope::ManageWebhooks])
        .await;
    let (revoked_id, revoked) = app.key(customer, &[Scope::ReadFindings]).await;
    let http = crate::support::client();
    let get = |key: &str, path: &str| {
        http.get(format!("{}/api/v1{path}", api.base))
            .bearer_auth(key)
            .send()
    };
    wait_for_usable(&http, &api.base, true).await;
    assert_eq!(
        get(&revoked, "/findings").await.unwrap().status(),
        StatusCode::OK
    );

    // Make the replica's last replayed commit recent (and everything written so far
    // replayed), then stop its replay: from the next commit on the primary, its lag grows
    // from zero.
    execute(
        &primary.url,
        "CREATE TABLE IF NOT EXISTS heartbeat (at timestamptz); INSERT INTO heartbeat VALUES (now())",
    )
    .await;
    wait_for_replay(&primary.url, &standby.url).await;
    let before = get(&key, "/findings").await.unwrap();
    assert_eq!(before.status(), StatusCode::OK);
    let tag = before.headers()["etag"].clone();
    execute(&standby.url, "SELECT pg_wal_replay_pause()").await;
    let paused = Instant::now();
    app.ingest(customer, &findings(&tenant, 4)).await;
    app.store
        .revoke_key(None, revoked_id, &Actor::Operator)
        .await
        .unwrap();

    // Within the bound, the read routes still answer from the replica as it stands, with the
    // tag of what they show.
    let stale = get(&key, "/findings").await.unwrap();
    assert_eq!(
        stale.headers()["etag"],
        tag,
        "the replica's tag with its body ({:?} after the pause)",
        paused.elapsed()
    );
    let body: Value = stale.json().await.unwrap();
    assert_eq!(body["data"].as_array().unwrap().len(), 3, "{body}");
    let export = get(&key, "/findings/export?format=ndjson").await.unwrap();
    assert_eq!(export.text().await.unwrap().lines().count(), 3);
    // ...but the revocation is honoured at once (keys are the primary's), and the webhook
    // routes see their own writes.
    wait_for(
        "the revocation honoured",
        Duration::from_secs(1),
        || async {
            let status = get(&revoked, "/findings").await.unwrap().status();
            (status == StatusCode::UNAUTHORIZED).then_some(())
        },
    )
    .await;
    let created = create_subscription(&http, &api.base, &key).await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let created: Value = created.json().await.unwrap();
    let id = created["data"]["id"].as_str().unwrap();
    let read_back = get(&key, &format!("/webhooks/{id}")).await.unwrap();
    assert_eq!(read_back.status(), StatusCode::OK);
    assert!(
        paused.elapsed() < MAX_LAG,
        "the stale reads took longer than the bound, so they prove nothing"
    );

    // Past the bound (and one check), the primary serves the reads.
    let bound = MAX_LAG + CHECK_EVERY + Duration::from_secs(2);
    wait_for("reads switching to the primary", bound, || async {
        let response = get(&key, "/findings").await.unwrap();
        let body: Value = response.json().await.unwrap();
        (body["data"].as_array().unwrap().len() == 4).then_some(())
    })
    .await;
    let switched = paused.elapsed();
    eprintln!("reads switched to the primary {switched:?} after the replay paused");
    // The lag counts from the last check the replica had caught up with, just before the
    // pause.
    assert!(
        switched >= MAX_LAG / 2,
        "switched before the bound: {switched:?}"
    );
    assert_eq!(
        metric(&http, &api.base, "posture_db_replica_usable{replica=\"1\"}").await,
        Some(0.0)
    );
    let lag = metric(
        &http,
        &api.base,
        "posture_db_replica_lag_seconds{replica=\"1\"}",
    )
    .await
    .unwrap();
    assert!(lag > MAX_LAG.as_secs_f64(), "{lag}");

    // Replaying again, the replica catches up and serves again.
    execute(&standby.url, "SELECT pg_wal_replay_resume()").await;
    let back = wait_for_usable(&http, &api.base, true).await;
    eprintln!("the replica was back in use {back:?} after its replay resumed");
    let body: Value = get(&key, "/findings").await.unwrap().json().await.unwrap();
    assert_eq!(body["data"].as_array().unwrap().len(), 4, "{body}");
}

#[tokio::test]
async fn a_replica_that_does_not_answer_is_skipped_and_the_primary_serves() {
    if posture_test_support::citus::single_node_only(
        "a streaming standby of one PostgreSQL node (on Citus: docs/operations.md, \"Running on Citus\", read replicas)",
    ) {
        return;
    }
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer("A").await;
    app.ingest(customer, &findings(&tenant, 2)).await;
    let (_, key) = app.key(customer, &[Scope::ReadFindings]).await;
    // A replica that takes each connection and closes it unanswered, counting them.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed = listener.local_addr().unwrap();
    let attempts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = attempts.clone();
    tokio::spawn(async move {
        while let Ok((connection, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(connection);
        }
    });
    let api = ApiProcess::spawn_with(
        &app.db,
        &redis_url(),
        10_000,
        &[
            (
                "POSTURE_DATABASE_READ_URL",
                app.db.url_through(closed).as_str(),
            ),
            ("POSTURE_REPLICA_CHECK_MS", "100"),
        ],
    );
    let http = crate::support::client();
    // Skipped from the start (nothing reads an unmeasured replica) and after its checks
    // found it answering nothing.
    wait_for(
        "three attempts to reach the replica",
        Duration::from_secs(10),
        || async {
            (std::sync::atomic::AtomicUsize::load(&attempts, std::sync::atomic::Ordering::SeqCst)
                >= 3)
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        metric(&http, &api.base, "posture_db_replica_usable{replica=\"1\"}").await,
        Some(0.0)
    );
    assert_eq!(
        metric(
            &http,
            &api.base,
            "posture_db_replica_lag_seconds{replica=\"1\"}"
        )
        .await,
        Some(f64::INFINITY),
        "a replica that does not answer counts as lagging without end"
    );
    let response = http
        .get(format!("{}/api/v1/findings", api.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["data"].as_array().unwrap().len(), 2, "{body}");
    let ready = http
        .get(format!("{}/readyz", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
}

/// The replica's data-version lookups so far: answered from memory, read from its database.
async fn replica_lookups(http: &Client, base: &str) -> (f64, f64) {
    let series = |result: &str| {
        format!("posture_data_version_lookups_total{{reader=\"replica\",result=\"{result}\"}}")
    };
    (
        metric(http, base, &series("hit")).await.unwrap_or(0.0),
        metric(http, base, &series("miss")).await.unwrap_or(0.0),
    )
}

#[tokio::test]
async fn a_replica_takes_the_primarys_data_versions_once_it_has_replayed_them() {
    if posture_test_support::citus::single_node_only(
        "a streaming standby of one PostgreSQL node (on Citus: docs/operations.md, \"Running on Citus\", read replicas)",
    ) {
        return;
    }
    let WithReplica {
        primary,
        standby,
        app,
        customer,
        tenant,
        api,
    } = WithReplica::start().await;
    let (_, key) = app.key(customer, &[Scope::ReadFindings]).await;
    let http = crate::support::client();
    let list = |tag: Option<&str>| {
        let request = http
            .get(format!("{}/api/v1/findings", api.base))
            .bearer_auth(&key);
        match tag {
            Some(tag) => request.header("If-None-Match", tag),
            None => request,
        }
        .send()
    };
    wait_for_usable(&http, &api.base, true).await;
    wait_for_replay(&primary.url, &standby.url).await;
    let first = list(None).await.unwrap();
    let tag = first.headers()["etag"].to_str().unwrap().to_owned();

    // The replica's first lookup reads its database and has the primary read the version
    // in the background; once the replica's lag check has seen it replay that far, the
    // replica answers the tag from memory.
    posture_test_support::waits::wait_for(
        "a replica's version lookup answered from memory",
        Duration::from_secs(10),
        || async {
            let before = replica_lookups(&http, &api.base).await.0;
            let response = list(Some(&tag)).await.unwrap();
            assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
            (replica_lookups(&http, &api.base).await.0 > before).then_some(())
        },
    )
    .await;
    let (hits, misses) = replica_lookups(&http, &api.base).await;
    for _ in 0..20 {
        let response = list(Some(&tag)).await.unwrap();
        assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(response.headers()["etag"].to_str().unwrap(), tag);
    }
    assert_eq!(
        replica_lookups(&http, &api.base).await,
        (hits + 20.0, misses),
        "every conditional read of a caught-up replica answered without reading its database"
    );

    // A pass the replica has not replayed: the primary's new version is not the replica's
    // to give, so it reads its own (the tag of the rows it still shows).
    execute(&standby.url, "SELECT pg_wal_replay_pause()").await;
    app.ingest(customer, &findings(&tenant, 4)).await;
    let old_tag = async || {
        let response = list(Some(&tag)).await.unwrap();
        assert_eq!(
            response.status(),
            StatusCode::NOT_MODIFIED,
            "the paused replica still shows the old rows, with their tag"
        );
    };
    posture_test_support::waits::wait_for(
        "the pass's notification forgetting the replica's version",
        Duration::from_secs(5),
        || async {
            let (hits, _) = replica_lookups(&http, &api.base).await;
            old_tag().await;
            (replica_lookups(&http, &api.base).await.0 == hits).then_some(())
        },
    )
    .await;
    // Each miss has had the primary read its new version by now; still not the replica's.
    let (hits, misses) = replica_lookups(&http, &api.base).await;
    for _ in 0..10 {
        old_tag().await;
    }
    assert_eq!(
        replica_lookups(&http, &api.base).await,
        (hits, misses + 10.0)
    );
    let stale: Value = list(None).await.unwrap().json().await.unwrap();
    assert_eq!(stale["data"].as_array().unwrap().len(), 3, "{stale}");

    // Replaying again, it takes the new version: the new tag, with the new rows.
    execute(&standby.url, "SELECT pg_wal_replay_resume()").await;
    wait_for_replay(&primary.url, &standby.url).await;
    let fresh = posture_test_support::waits::wait_for(
        "the replica answering the new version from memory",
        Duration::from_secs(10),
        || async {
            let (hits, _) = replica_lookups(&http, &api.base).await;
            let response = list(Some(&tag)).await.unwrap();
            let (after, _) = replica_lookups(&http, &api.base).await;
            (after > hits).then_some(response)
        },
    )
    .await;
    assert_eq!(fresh.status(), StatusCode::OK);
    assert_ne!(fresh.headers()["etag"].to_str().unwrap(), tag);
    let body: Value = fresh.json().await.unwrap();
    assert_eq!(body["data"].as_array().unwrap().len(), 4, "{body}");
}
