//! A triage write waits for the customer's analyzer pass a bounded time, and says so when
//! it waited past it.

use diesel_async::{AsyncConnection as _, RunQueryDsl as _};
use posture_domain::{Error, clock::Clock as _, ports::FindingRepository as _};
use posture_test_support::TestDb;

use crate::triage::{dismiss, id, setup};

/// A triage write that waits past the pass's bound is told so (`Busy`, a 503 that names the
/// wait), not taken for an outage (`Unavailable`).
#[tokio::test]
async fn a_triage_behind_a_pass_past_its_wait_is_busy_not_unavailable() {
    let db = TestDb::new().await;
    let (store, clock) = db.store_with_clock();
    let (a, a_key, _) = setup(&store, "A").await;
    let mut pass = db.connection().await;
    pass.begin_test_transaction().await.unwrap();
    diesel::sql_query(format!(
        "SELECT 1 FROM customer_sync WHERE customer_id = '{}' FOR UPDATE",
        a.customer_id()
    ))
    .execute(&mut pass)
    .await
    .unwrap();
    let error = store
        .triage_finding(a, &id("f1"), &dismiss(clock.now(), None), a_key, None)
        .await
        .unwrap_err();
    match error {
        Error::Busy(reason) => assert!(reason.contains("analyzer pass")),
        other => panic!("{other:?}"),
    }
    drop(pass);
    store
        .triage_finding(a, &id("f1"), &dismiss(clock.now(), None), a_key, None)
        .await
        .unwrap();
}
