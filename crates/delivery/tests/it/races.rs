//! The races of the outbox, made deterministic: a deactivation while a pass fans out, orphaned
//! deliveries in front of the claim, and deliveries that cannot be prepared.

use posture_domain::fair_share::ClaimRequest;
use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    delivery::DeliveryStatus,
    ports::{DeliveryRepository, WebhookRepository},
    secrets::Keyring,
};
use posture_test_support::{fixtures, waits::wait_for};

use crate::support::{Setup, finding, hook_url, receiver};

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

async fn count(conn: &mut AsyncPgConnection, sql: &str) -> i64 {
    diesel::sql_query(sql)
        .get_result::<Count>(conn)
        .await
        .unwrap()
        .n
}

/// Waits until some session waits for a lock on `table`.
async fn someone_waits_for(conn: &mut AsyncPgConnection, table: &str) {
    let sql = format!(
        "SELECT count(*) AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
         WHERE c.relname = '{table}' AND NOT l.granted"
    );
    let what = format!("a session waiting for {table}");
    let conn = tokio::sync::Mutex::new(conn);
    wait_for(&what, Duration::from_secs(10), || async {
        (count(&mut **conn.lock().await, &sql).await > 0).then_some(())
    })
    .await;
}

/// Sessions waiting for a lock, on any node: on Citus a worker node's waits show in
/// `citus_lock_waits`, not in the coordinator's `pg_locks`.
async fn lock_waits(conn: &mut AsyncPgConnection) -> i64 {
    let local = count(conn, "SELECT count(*) AS n FROM pg_locks WHERE NOT granted").await;
    let citus = count(
        conn,
        "SELECT count(*) AS n FROM pg_extension WHERE extname = 'citus'",
    )
    .await;
    match citus {
        0 => local,
        _ => local + count(conn, "SELECT count(*) AS n FROM citus_lock_waits").await,
    }
}

/// Waits until more sessions wait for a lock than `before`.
async fn another_waits(conn: &mut AsyncPgConnection, before: i64) {
    let conn = tokio::sync::Mutex::new(conn);
    wait_for(
        "another session waiting for a lock",
        Duration::from_secs(10),
        || async { (lock_waits(&mut **conn.lock().await).await > before).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn a_deactivation_during_a_pass_fan_out_leaves_no_delivery_pending() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let (_server, subscription, _) = setup.subscribed(customer, 200, &["finding_critical"]).await;
    // Hold the pass after its fan-out: it records itself in analyzer_passes last.
    let mut holder = AsyncPgConnection::establish(setup.db.url()).await.unwrap();
    diesel::sql_query("BEGIN")
        .execute(&mut holder)
        .await
        .unwrap();
    diesel::sql_query("LOCK TABLE analyzer_passes IN SHARE MODE")
        .execute(&mut holder)
        .await
        .unwrap();
    let pass = {
        let store = setup.store.clone();
        let text = fixtures::lines(&[finding("c1", &tenant, "critical")]);
        tokio::spawn(async move { fixtures::ingest(&store, customer, &text).await })
    };
    someone_waits_for(&mut holder, "analyzer_passes").await;
    let before = lock_waits(&mut holder).await;
    // The deactivation runs while the pass's deliveries are written but not committed: it
    // waits for the pass's locks.
    let deactivation = {
        let store = setup.store.clone();
        tokio::spawn(async move { store.deactivate_subscription(customer, subscription).await })
    };
    another_waits(&mut holder, before).await;
    diesel::sql_query("ROLLBACK")
        .execute(&mut holder)
        .await
        .unwrap();
    let summary = pass.await.unwrap().unwrap();
    assert_eq!(summary.counts.deliveries, 1, "the pass queued its delivery");
    deactivation.await.unwrap().unwrap();
    let statuses: Vec<DeliveryStatus> = setup
        .deliveries(customer)
        .await
        .iter()
        .map(|d| d.status)
        .collect();
    assert_eq!(statuses, vec![DeliveryStatus::Cancelled]);
}

#[tokio::test]
async fn orphaned_deliveries_never_keep_the_claim_from_deliverable_ones() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let (server, orphaned, _) = setup.subscribed(customer, 200, &["finding_critical"]).await;
    // 20 deliveries (2,000 new critical findings), then their subscription deactivated the
    // way the race above could leave it: inactive, its deliveries still pending.
    let records: Vec<_> = (0..2000)
        .map(|i| finding(&format!("c{i:04}"), &tenant, "critical"))
        .collect();
    setup.pass(customer, &records).await;
    let mut conn = AsyncPgConnection::establish(setup.db.url()).await.unwrap();
    diesel::sql_query(format!(
        "UPDATE webhook_subscriptions SET active = false, deactivated_at = now() \
         WHERE id = '{orphaned}'"
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    setup
        .subscribe(customer, &hook_url(&server), &["finding_high"])
        .await;
    setup
        .pass(customer, &[finding("h1", &tenant, "high")])
        .await;
    let claimed = setup
        .store
        .claim_due(&ClaimRequest::unbounded("w1", 10, Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(
        claimed.len(),
        1,
        "the deliverable one is claimed, past 20 orphans"
    );
    assert_eq!(claimed[0].delivery.event_type.as_str(), "finding_high");
    let cancelled = setup
        .deliveries(customer)
        .await
        .iter()
        .filter(|d| d.status == DeliveryStatus::Cancelled)
        .count();
    assert_eq!(cancelled, 20, "the orphans met are cancelled");
    assert_eq!(setup.db.assert_delivery_totals().await, 21);
}

/// During a rolling upgrade a newer ingest may write a delivery of an event type this build
/// does not know (its migration widened the check first): it waits for a newer worker and
/// hides from this build's log, instead of failing every claim and page.
#[tokio::test]
async fn a_delivery_of_an_event_type_from_a_newer_build_waits_and_breaks_nothing() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let (_server, _, _) = setup.subscribed(customer, 200, &["finding_high"]).await;
    setup
        .pass(customer, &[finding("h1", &tenant, "high")])
        .await;
    setup
        .pass(customer, &[finding("h2", &tenant, "high")])
        .await;
    let mut conn = AsyncPgConnection::establish(setup.db.url()).await.unwrap();
    diesel::sql_query(
        "ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_type_check",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let newer = setup.deliveries(customer).await[0].id;
    diesel::sql_query(format!(
        "UPDATE webhook_deliveries SET event_type = 'finding_from_a_newer_build' \
         WHERE customer_id = '{}' AND id = '{}'",
        customer.customer_id().as_uuid(),
        newer.as_uuid()
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    let claimed = setup
        .store
        .claim_due(&ClaimRequest::unbounded("w1", 10, Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1, "the known one is claimed");
    assert_ne!(claimed[0].delivery.id, newer);
    let listed = setup.deliveries(customer).await;
    assert_eq!(listed.len(), 1, "the log lists what this build can read");
    assert_eq!(
        count(
            &mut conn,
            "SELECT count(*) AS n FROM webhook_deliveries \
             WHERE event_type = 'finding_from_a_newer_build' AND status = 'pending'"
        )
        .await,
        1,
        "the newer one waits, pending"
    );
}

#[tokio::test]
async fn a_delivery_that_cannot_be_prepared_counts_attempts_and_ends_failed() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let server = receiver(200).await;
    // The subscription's secret is sealed with a key the worker does not hold.
    let other = Keyring::new(&[1; 32], &[]).unwrap();
    let (subscription, _) = fixtures::subscription(
        &setup.store,
        &other,
        customer,
        &hook_url(&server),
        "generic",
        &["finding_low"],
    )
    .await;
    setup.pass(customer, &[finding("l1", &tenant, "low")]).await;
    let worker = setup.worker_behind(true);
    let delivery = &setup.drain_until_failed(&worker, customer, 8).await;
    assert_eq!(delivery.attempts, 4, "every attempt counted, up to the cap");
    let attempts = setup.store.attempts(customer, delivery.id).await.unwrap();
    assert!(
        attempts[0]
            .error
            .as_deref()
            .unwrap()
            .starts_with("the signing secret cannot be opened"),
        "{:?}",
        attempts[0].error
    );
    assert!(server.received_requests().await.unwrap().is_empty());
    assert!(
        setup
            .store
            .get_subscription(customer, subscription)
            .await
            .is_ok()
    );
}
