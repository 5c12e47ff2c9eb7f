//! Losing the primary for good: `posture-api` on a `DATABASE_URL` naming a primary and its
//! standby (`target_session_attrs=read-write`) follows the standby once it is promoted, by
//! itself — its pools, its key cache's `LISTEN` and its data-version cache — answering 503
//! with `Retry-After` meanwhile, never 500. (The full Patroni cluster is `cargo xtask
//! chaos`'s; this is the two-node promotion every `cargo xtask test` runs.)

use std::{
    process::Command,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use posture_domain::Scope;
use posture_test_support::{fixtures, redis_url, servers::PostgresServer, waits::wait_for};
use reqwest::StatusCode;

use crate::{
    rate_limits::ApiProcess,
    replicas::{create_subscription, wait_for_replay},
    support::TestApp,
};

/// `url` (a database of `primary`) naming both servers, the writable one to be chosen.
fn both_hosts(url: &str, primary: u16, standby: u16) -> String {
    let one = format!("127.0.0.1:{primary}");
    assert!(url.contains(&one), "{url}");
    let both = url.replace(&one, &format!("{one},127.0.0.1:{standby}"));
    let sep = if both.contains('?') { '&' } else { '?' };
    format!("{both}{sep}target_session_attrs=read-write")
}

#[tokio::test]
async fn a_standby_promoted_after_the_primary_crashes_takes_over_without_a_restart() {
    if posture_test_support::citus::single_node_only(
        "the promotion of one PostgreSQL node's standby (on Citus each node fails over on its own: docs/operations.md)",
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!(
        "posture-failover-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let primary = PostgresServer::start(&dir.join("primary"), "").unwrap();
    let standby = primary.start_standby(&dir.join("standby")).unwrap();
    let app = TestApp::on_server(&primary.url).await;
    let (customer, tenant) = app.customer("A").await;
    app.ingest(
        customer,
        &[
            fixtures::identity("u1", &tenant, "Ada"),
            fixtures::finding("f1", &tenant, "high", "open", "u1"),
        ],
    )
    .await;
    let (_, key) = app
        .key(customer, &[Scope::ReadFindings, Scope::ManageWebhooks])
        .await;
    let (revoked_id, revoked) = app.key(customer, &[Scope::ReadFindings]).await;
    let (p1, p2) = (primary.port(), standby.port());
    let api = ApiProcess::spawn_with(
        &app.db,
        &redis_url(),
        10_000,
        &[("DATABASE_URL", &both_hosts(&app.db.runtime_url(), p1, p2))],
    );
    let http = crate::support::client();
    let get = |key: &str| {
        http.get(format!("{}/api/v1/findings", api.base))
            .bearer_auth(key)
            .send()
    };
    assert_eq!(get(&key).await.unwrap().status(), StatusCode::OK);
    assert_eq!(get(&revoked).await.unwrap().status(), StatusCode::OK);
    wait_for_replay(&primary.url, &standby.url).await;

    // The primary's postmaster dies (an immediate stop: no checkpoint, connections cut);
    // the standby is promoted, as Patroni would.
    primary.crash();
    let crashed = Instant::now();
    let meanwhile: Arc<Mutex<Vec<(StatusCode, bool)>>> = Arc::default();
    let answer = || async {
        let response = get(&key).await.unwrap();
        let status = response.status();
        let retry_after = response.headers().contains_key("retry-after");
        meanwhile.lock().unwrap().push((status, retry_after));
        status
    };
    // Without a primary (the standby is read-only, so it is no candidate): 503s.
    wait_for(
        "a 503 without a primary",
        Duration::from_secs(10),
        || async { (answer().await == StatusCode::SERVICE_UNAVAILABLE).then_some(()) },
    )
    .await;
    standby.promote().unwrap();
    let promoted = Instant::now();
    wait_for(
        "the API to answer from the promoted standby",
        Duration::from_secs(30),
        || async { (answer().await == StatusCode::OK).then_some(()) },
    )
    .await;
    let (took, down) = (promoted.elapsed(), crashed.elapsed());
    let meanwhile = meanwhile.lock().unwrap().clone();
    for (status, retry_after) in &meanwhile[..meanwhile.len() - 1] {
        assert_eq!(
            (*status, *retry_after),
            (StatusCode::SERVICE_UNAVAILABLE, true),
            "while there is no primary: 503 with Retry-After ({meanwhile:?})"
        );
    }
    eprintln!(
        "failover: first 200 {took:?} after the promotion, {down:?} after the crash ({} \
         requests meanwhile)",
        meanwhile.len()
    );

    // Writes go to the new primary.
    let created = create_subscription(&http, &api.base, &key).await;
    assert_eq!(created.status(), StatusCode::CREATED);

    // A key revoked on the new primary (by the operator's command) is refused at once: the
    // key cache's LISTEN follows the primary too.
    let owner_on_standby = app
        .db
        .url()
        .replace(&format!("127.0.0.1:{p1}"), &format!("127.0.0.1:{p2}"));
    let revoke = Command::new(env!("CARGO_BIN_EXE_posture-api"))
        .args(["keys", "revoke", &revoked_id.to_string()])
        .env("DATABASE_URL", &owner_on_standby)
        .env("POSTURE_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        revoke.status.success(),
        "{}",
        String::from_utf8_lossy(&revoke.stderr)
    );
    let revoked_at = Instant::now();
    wait_for(
        "the revocation to reach the instance",
        Duration::from_secs(5),
        || async {
            (get(&revoked).await.unwrap().status() == StatusCode::UNAUTHORIZED).then_some(())
        },
    )
    .await;
    assert!(
        revoked_at.elapsed() < Duration::from_millis(1500),
        "the revocation took {:?}",
        revoked_at.elapsed()
    );
    drop(api);
    drop(standby);
    // The test's database lived on the crashed primary: dropping it there would only fail
    // (loudly), and the clusters' directory goes as a whole.
    std::mem::forget(app);
    let _ = std::fs::remove_dir_all(&dir);
}
