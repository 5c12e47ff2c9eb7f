//! Exports cannot be held by a client: the stall bound, the slot wait, fair slots, and the
//! database session timeouts of the API's connections.

use std::time::{Duration, Instant};

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use posture_domain::Scope;
use posture_test_support::{
    TestDb,
    fixtures::{finding, identity},
};
use reqwest::StatusCode;
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpSocket, TcpStream},
};

use crate::support::{TestApp, assert_error};

/// A customer with `n` findings and a key that reads them.
async fn exporter(app: &TestApp, name: &str, n: usize) -> String {
    let (scope, tenant) = app.customer(name).await;
    let mut records = vec![identity("u1", &tenant, "Ada")];
    records.extend((0..n).map(|i| finding(&format!("f-{i:05}"), &tenant, "high", "open", "u1")));
    // The pass runs on a store of its own, without the server's short idle-in-transaction
    // timeout: what these tests bound is the export, and on a loaded machine a pause of the
    // pass between two batches reached 500 ms and ended it.
    posture_test_support::fixtures::ingest(
        &app.db.store(),
        scope,
        &posture_test_support::fixtures::lines(&records),
    )
    .await
    .unwrap();
    app.key(scope, &[Scope::ReadFindings]).await.1
}

/// Starts an export with a client that reads the head of the response and then stops
/// reading (a small receive window, so the server's buffers fill up quickly).
async fn stalled_export(app: &TestApp, key: &str) -> TcpStream {
    let addr = app.base.trim_start_matches("http://").parse().unwrap();
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let request = format!(
        "GET /api/v1/findings/export HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {key}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    stream
}

/// Connections of `db` inside a transaction reading findings (an export's snapshot), other
/// than the asker's.
async fn in_transaction(db: &TestDb) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = AsyncPgConnection::establish(db.url()).await.unwrap();
    let database = db.url().rsplit('/').next().unwrap().to_owned();
    let count: Count = diesel::sql_query(
        "SELECT count(*) AS n FROM pg_stat_activity \
         WHERE datname = $1 AND xact_start IS NOT NULL AND pid <> pg_backend_pid() \
             AND query ILIKE '%findings%'",
    )
    .bind::<diesel::sql_types::Text, _>(&database)
    .get_result(&mut conn)
    .await
    .unwrap();
    count.n
}

/// Waits (up to `within`) until `check` holds; returns how long it took.
async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    posture_test_support::waits::wait_for(what, within, || {
        let holds = check();
        async { holds.await.then_some(()) }
    })
    .await;
    started.elapsed()
}

#[tokio::test]
async fn an_export_whose_client_stops_reading_is_ended_and_gives_back_its_slot_and_snapshot() {
    let stall = Duration::from_secs(1);
    let app = TestApp::with_exports(1, Duration::from_millis(300), stall).await;
    let key_a = exporter(&app, "A", 20_000).await;
    let key_b = exporter(&app, "B", 10).await;
    let mut stalled = stalled_export(&app, &key_a).await;
    let stopped_reading = Instant::now();
    // While it holds the only slot, another export waits its 300 ms, then is told to retry.
    let busy = app.get("/api/v1/findings/export", &key_b).await;
    assert!(busy.headers().contains_key("retry-after"));
    let reason = assert_error(busy, StatusCode::SERVICE_UNAVAILABLE, "unavailable").await;
    assert!(reason.contains("export slot"), "{reason}");
    // The stalled export is ended after the stall bound: its snapshot and slot come back
    // (once the socket's buffers are full, which on a loaded machine takes a while).
    eventually(Duration::from_secs(30), "the snapshot ends", || async {
        in_transaction(&app.db).await == 0
    })
    .await;
    let cut_after = stopped_reading.elapsed();
    assert!(cut_after >= stall, "cut after {cut_after:?}");
    let ok = app.get("/api/v1/findings/export", &key_b).await;
    assert_eq!(ok.status(), StatusCode::OK);
    assert_eq!(ok.text().await.unwrap().lines().count(), 10);
    // The stalled client, reading again, gets a transfer that does not end properly.
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stalled.read_to_end(&mut rest)).await;
    assert!(
        !rest.ends_with(b"0\r\n\r\n"),
        "a cut export must not look complete"
    );
    eprintln!("stalled export cut {cut_after:?} after its client stopped reading");
}

#[tokio::test]
async fn export_slots_are_shared_fairly_between_customers() {
    let app = TestApp::with_exports(2, Duration::from_millis(300), Duration::from_secs(30)).await;
    let key_a = exporter(&app, "A", 20_000).await;
    let key_b = exporter(&app, "B", 10).await;
    let _stalled = stalled_export(&app, &key_a).await;
    // A holds its share (one of two slots): its next export waits, then 503.
    assert_error(
        app.get("/api/v1/findings/export", &key_a).await,
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
    )
    .await;
    // B still gets the other slot.
    let b = app.get("/api/v1/findings/export", &key_b).await;
    assert_eq!(b.status(), StatusCode::OK);
    assert_eq!(b.text().await.unwrap().lines().count(), 10);
}

#[tokio::test]
async fn a_statement_stuck_behind_a_lock_ends_at_the_statement_timeout_with_503() {
    let app = TestApp::with_db_timeouts(Duration::from_millis(300), Duration::from_secs(60)).await;
    let key = exporter(&app, "A", 10).await;
    let mut locker = AsyncPgConnection::establish(app.db.url()).await.unwrap();
    diesel::sql_query("BEGIN")
        .execute(&mut locker)
        .await
        .unwrap();
    diesel::sql_query("LOCK TABLE findings IN ACCESS EXCLUSIVE MODE")
        .execute(&mut locker)
        .await
        .unwrap();
    let started = Instant::now();
    let response = app.get("/api/v1/findings", &key).await;
    let took = started.elapsed();
    assert!(response.headers().contains_key("retry-after"));
    assert_error(response, StatusCode::SERVICE_UNAVAILABLE, "unavailable").await;
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    diesel::sql_query("ROLLBACK")
        .execute(&mut locker)
        .await
        .unwrap();
    assert_eq!(
        app.get("/api/v1/findings", &key).await.status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn an_idle_export_transaction_is_ended_by_the_idle_in_transaction_timeout() {
    let app = TestApp::with_db_timeouts(Duration::from_secs(30), Duration::from_millis(500)).await;
    let key = exporter(&app, "A", 20_000).await;
    let _stalled = stalled_export(&app, &key).await;
    assert_eq!(in_transaction(&app.db).await, 1);
    eventually(
        Duration::from_secs(10),
        "PostgreSQL ends the idle transaction",
        || async { in_transaction(&app.db).await == 0 },
    )
    .await;
}

#[tokio::test]
async fn a_query_whose_connection_is_terminated_is_503_and_the_next_request_works() {
    let app = TestApp::start().await;
    let key = exporter(&app, "A", 10).await;
    let mut admin = AsyncPgConnection::establish(app.db.url()).await.unwrap();
    diesel::sql_query("BEGIN")
        .execute(&mut admin)
        .await
        .unwrap();
    diesel::sql_query("LOCK TABLE findings IN ACCESS EXCLUSIVE MODE")
        .execute(&mut admin)
        .await
        .unwrap();
    let request = {
        let client = app.client.clone();
        let url = app.url("/api/v1/findings");
        let key = key.clone();
        tokio::spawn(async move { client.get(url).bearer_auth(key).send().await.unwrap() })
    };
    // The request's queries wait for the lock (its tag's version read, then the list's); end
    // each one's backend as a shutdown would, until the request is answered.
    let database = app.db.url().rsplit('/').next().unwrap().to_owned();
    let (url, database, pending) = (app.db.url(), &database, &request);
    eventually(
        Duration::from_secs(10),
        "the request is answered once its waiting queries are ended",
        || async move {
            if pending.is_finished() {
                return true;
            }
            let mut conn = AsyncPgConnection::establish(url).await.unwrap();
            diesel::sql_query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = $1 AND wait_event_type = 'Lock'",
            )
            .bind::<diesel::sql_types::Text, _>(database)
            .execute(&mut conn)
            .await
            .unwrap();
            false
        },
    )
    .await;
    let response = request.await.unwrap();
    assert!(response.headers().contains_key("retry-after"));
    assert_error(response, StatusCode::SERVICE_UNAVAILABLE, "unavailable").await;
    diesel::sql_query("ROLLBACK")
        .execute(&mut admin)
        .await
        .unwrap();
    // The dead connection is not handed out again.
    for _ in 0..10 {
        assert_eq!(
            app.get("/api/v1/findings?limit=1", &key).await.status(),
            StatusCode::OK
        );
    }
}
