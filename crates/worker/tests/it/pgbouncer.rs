//! posture-worker and an analyzer pass through PgBouncer in transaction mode: the pool and
//! the pass go through the pooler (fewer server connections than clients), the `LISTEN`
//! connection goes straight to PostgreSQL (`POSTURE_DATABASE_LISTEN_URL`).

use std::time::{Duration, Instant};

use posture_domain::{delivery::DeliveryStatus, ports::DeliveryRepository};
use posture_store_postgres::{PgConfig, PgStore};
use posture_test_support::{TestDb, pgbouncer::PgBouncer, waits::wait_for};

use crate::{
    critical_findings, customer_with_subscription, listening, slow_receiver, wait_for_requests,
    worker,
};

#[tokio::test]
async fn a_pass_and_the_worker_run_through_pgbouncer_in_transaction_mode() {
    let db = TestDb::new().await;
    // Two server connections for a pool of eight: statements of one client land on
    // connections other clients prepared theirs on.
    let bouncer = PgBouncer::start(db.server_addr(), 2);
    let through = bouncer.url(&db.runtime_url());
    let mut config = PgConfig::new(through.clone(), posture_domain::clock::system());
    config.max_connections = 8;
    config.listen_url = Some(db.runtime_url());
    let store = PgStore::new(&config).unwrap();
    let server = slow_receiver(Duration::ZERO).await;
    let (scope, tenant) =
        customer_with_subscription(&store, &format!("{}/hook", server.uri())).await;
    let listen = db.runtime_url();
    // A poll interval longer than the test: the wake-up comes through the direct LISTEN.
    let mut running = worker(
        &db,
        &[],
        &[
            ("DATABASE_URL", through.as_str()),
            ("POSTURE_DATABASE_LISTEN_URL", listen.as_str()),
            ("POSTURE_WORKER_POLL_SECS", "300"),
        ],
    );
    listening(&db).await;
    let queued = Instant::now();
    // Passes of 250 critical findings, run concurrently with reads on the same pool.
    let reads = (0..16).map(|_| {
        let store = store.clone();
        tokio::spawn(async move { store.list_deliveries(scope, None, None, 100).await })
    });
    critical_findings(&store, scope, &tenant, 250).await;
    for read in reads {
        read.await.unwrap().unwrap();
    }
    wait_for_requests(&server, 3).await;
    assert!(
        queued.elapsed() < Duration::from_secs(10),
        "woken through the direct LISTEN connection"
    );
    wait_for("all three delivered", Duration::from_secs(20), || async {
        let deliveries = store.list_deliveries(scope, None, None, 100).await.unwrap();
        let delivered = deliveries
            .iter()
            .all(|d| d.status == DeliveryStatus::Delivered);
        (deliveries.len() == 3 && delivered).then_some(())
    })
    .await;
    running.kill().unwrap();
    running.wait().unwrap();
}
