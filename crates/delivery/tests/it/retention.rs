//! The delivery log's retention: the worker deletes finished deliveries older than it (with
//! their attempts) and never a pending one.

use diesel_async::RunQueryDsl;
use posture_domain::delivery::DeliveryStatus;

use crate::support::{Setup, finding, hook_url, receiver};

#[tokio::test]
async fn the_sweep_deletes_finished_deliveries_past_the_retention_and_keeps_the_rest() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let (_server, _, _) = setup
        .subscribed(
            customer,
            200,
            &["finding_critical", "finding_high", "finding_low"],
        )
        .await;
    setup
        .pass(
            customer,
            &[
                finding("c1", &tenant, "critical"),
                finding("h1", &tenant, "high"),
            ],
        )
        .await;
    let worker = setup.worker(true);
    assert_eq!(worker.drain().await.unwrap(), 2);
    setup
        .pass(
            customer,
            &[
                finding("c1", &tenant, "critical"),
                finding("h1", &tenant, "high"),
                finding("l1", &tenant, "low"),
            ],
        )
        .await;
    // Age everything: the two delivered, and the pending one (not yet sent).
    let mut conn = setup.db.connection().await;
    // In UTC wall time: Citus refuses a time zone dependent sum of a column in an UPDATE.
    diesel::sql_query(
        "UPDATE webhook_deliveries \
         SET created_at = (created_at AT TIME ZONE 'UTC' - interval '31 days') AT TIME ZONE 'UTC'",
    )
    .execute(&mut conn)
    .await
    .unwrap();

    assert_eq!(worker.sweep().await.unwrap(), 2, "the two delivered ones");
    let left = setup.deliveries(customer).await;
    assert_eq!(left.len(), 1);
    assert_eq!(
        left[0].status,
        DeliveryStatus::Pending,
        "never a pending one"
    );
    let attempts: i64 = diesel::sql_query("SELECT count(*) AS n FROM webhook_attempts")
        .get_result::<Count>(&mut conn)
        .await
        .unwrap()
        .n;
    assert_eq!(attempts, 0, "the attempts went with their deliveries");
    assert_eq!(
        setup.db.assert_delivery_totals().await,
        1,
        "the totals lost the two swept"
    );
    assert_eq!(worker.sweep().await.unwrap(), 0, "nothing more to sweep");
}

#[tokio::test]
async fn deliveries_within_the_retention_are_kept() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let server = receiver(200).await;
    setup
        .one_delivery_to(customer, &tenant, &hook_url(&server), "high")
        .await;
    let worker = setup.worker(true);
    assert_eq!(worker.drain().await.unwrap(), 1);
    let mut conn = setup.db.connection().await;
    // In UTC wall time: Citus refuses a time zone dependent sum of a column in an UPDATE.
    diesel::sql_query(
        "UPDATE webhook_deliveries \
         SET created_at = (created_at AT TIME ZONE 'UTC' - interval '29 days') AT TIME ZONE 'UTC'",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    assert_eq!(worker.sweep().await.unwrap(), 0);
    assert_eq!(setup.deliveries(customer).await.len(), 1);
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}
