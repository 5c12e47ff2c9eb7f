//! Planner statistics after a pass: a customer's large first pass must not leave the
//! planner believing the customer has a handful of rows.

use diesel::{QueryableByName, sql_types::Json};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use posture_domain::CustomerScope;
use posture_test_support::{
    TestDb,
    fixtures::{self, customer, finding, identity, ingest, lines, tenant},
};

/// A pass of one tenant with `n` findings over 10 identities.
fn pass(n: usize) -> String {
    let t = fixtures::tenant_id();
    let mut records = vec![tenant(&t, "Contoso")];
    records.extend((0..10).map(|i| identity(&format!("u{i}"), &t, "User")));
    records.extend((0..n).map(|i| {
        finding(
            &format!("f{i}"),
            &t,
            "high",
            "open",
            &format!("u{}", i % 10),
        )
    }));
    lines(&records)
}

#[derive(QueryableByName)]
struct Explained {
    #[diesel(sql_type = Json, column_name = "QUERY PLAN")]
    plan: serde_json::Value,
}

async fn estimated_findings(conn: &mut AsyncPgConnection, scope: CustomerScope) -> f64 {
    let explained: Explained = diesel::sql_query(format!(
        "EXPLAIN (FORMAT JSON) SELECT 1 FROM findings WHERE customer_id = '{}'",
        scope.customer_id().as_uuid()
    ))
    .get_result(conn)
    .await
    .unwrap();
    explained.plan[0]["Plan"]["Plan Rows"].as_f64().unwrap()
}

#[derive(QueryableByName)]
struct Analyzed {
    #[diesel(sql_type = diesel::sql_types::Int8)]
    analyze_count: i64,
}

async fn manual_analyzes(conn: &mut AsyncPgConnection) -> i64 {
    diesel::sql_query("SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'findings'")
        .get_result::<Analyzed>(conn)
        .await
        .unwrap()
        .analyze_count
}

/// Customer A's rows are analyzed; customer B is then unknown to the statistics.
/// Autovacuum is kept away from `findings`, so only a pass analyzes it.
async fn analyzed_with_one_customer(db: &TestDb) -> AsyncPgConnection {
    let store = db.store();
    let mut conn = AsyncPgConnection::establish(db.url()).await.unwrap();
    diesel::sql_query("ALTER TABLE findings SET (autovacuum_enabled = false)")
        .execute(&mut conn)
        .await
        .unwrap();
    let a = customer(&store, "A").await;
    ingest(&store, a, &pass(1_500)).await.unwrap();
    diesel::sql_query("ANALYZE findings")
        .execute(&mut conn)
        .await
        .unwrap();
    conn
}

#[tokio::test]
async fn a_large_first_pass_leaves_the_planner_a_true_estimate_of_the_customer() {
    let db = TestDb::new().await;
    let mut conn = analyzed_with_one_customer(&db).await;
    let store = db.store();
    let b = customer(&store, "B").await;
    let before = estimated_findings(&mut conn, b).await;
    assert!(
        before < 10.0,
        "an unknown customer is estimated at a handful of rows ({before})"
    );
    let analyzes = manual_analyzes(&mut conn).await;

    ingest(&store, b, &pass(12_000)).await.unwrap();

    let after = estimated_findings(&mut conn, b).await;
    assert!(
        (6_000.0..=24_000.0).contains(&after),
        "12,000 findings are estimated at {after} rows"
    );
    assert_eq!(manual_analyzes(&mut conn).await, analyzes + 1);
}

#[tokio::test]
async fn a_pass_of_a_customer_the_planner_estimates_well_analyzes_nothing() {
    let db = TestDb::new().await;
    let mut conn = analyzed_with_one_customer(&db).await;
    let store = db.store();
    let b = customer(&store, "B").await;
    ingest(&store, b, &pass(12_000)).await.unwrap();
    let analyzes = manual_analyzes(&mut conn).await;

    ingest(&store, b, &pass(12_100)).await.unwrap();

    assert_eq!(
        manual_analyzes(&mut conn).await,
        analyzes,
        "the second pass found the estimate close enough"
    );
}

/// Below 10,000 rows a stale estimate is left to autovacuum.
#[tokio::test]
async fn a_customer_below_ten_thousand_rows_is_never_analyzed() {
    let db = TestDb::new().await;
    let mut conn = analyzed_with_one_customer(&db).await;
    let analyzes = manual_analyzes(&mut conn).await;
    let store = db.store();
    let b = customer(&store, "B").await;

    ingest(&store, b, &pass(9_000)).await.unwrap();

    assert_eq!(manual_analyzes(&mut conn).await, analyzes);
}
