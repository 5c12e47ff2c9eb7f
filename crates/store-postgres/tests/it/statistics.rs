//! Planner statistics after a pass: a customer's large first pass must not leave the
//! planner believing the customer has a handful of rows.

use diesel::{QueryableByName, sql_types::Json};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use posture_domain::CustomerScope;
use posture_store_postgres::PgStore;
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
    posture_store_postgres::planned_rows(&explained.plan).unwrap()
}

#[derive(QueryableByName)]
struct Analyzed {
    #[diesel(sql_type = diesel::sql_types::Int8)]
    analyze_count: i64,
}

/// How often `findings` was analyzed; on Citus, its shards on every node.
async fn manual_analyzes(conn: &mut AsyncPgConnection) -> i64 {
    let sql = if posture_test_support::citus::on_citus() {
        "SELECT coalesce(sum(result::int8), 0)::int8 AS analyze_count \
         FROM run_command_on_shards('findings', \
             $$SELECT analyze_count FROM pg_stat_user_tables WHERE relid = '%s'::regclass$$)"
    } else {
        "SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'findings'"
    };
    diesel::sql_query(sql)
        .get_result::<Analyzed>(conn)
        .await
        .unwrap()
        .analyze_count
}

/// A database where customer A's rows are analyzed and customer B, just created, is
/// unknown to the statistics. Autovacuum is kept away from `findings`, so only a pass
/// analyzes it.
struct Setup {
    _db: TestDb,
    store: PgStore,
    conn: AsyncPgConnection,
    b: CustomerScope,
}

impl Setup {
    async fn new() -> Self {
        let db = TestDb::new().await;
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
        let b = customer(&store, "B").await;
        Self {
            _db: db,
            store,
            conn,
            b,
        }
    }

    async fn ingest_b(&self, findings: usize) {
        ingest(&self.store, self.b, &pass(findings)).await.unwrap();
    }
}

#[tokio::test]
async fn a_large_first_pass_leaves_the_planner_a_true_estimate_of_the_customer() {
    let mut s = Setup::new().await;
    let before = estimated_findings(&mut s.conn, s.b).await;
    assert!(
        before < 10.0,
        "an unknown customer is estimated at a handful of rows ({before})"
    );
    let analyzes = manual_analyzes(&mut s.conn).await;

    s.ingest_b(12_000).await;

    let after = estimated_findings(&mut s.conn, s.b).await;
    assert!(
        (6_000.0..=24_000.0).contains(&after),
        "12,000 findings are estimated at {after} rows"
    );
    assert_eq!(manual_analyzes(&mut s.conn).await, analyzes + 1);
}

#[tokio::test]
async fn a_pass_of_a_customer_the_planner_estimates_well_analyzes_nothing() {
    let mut s = Setup::new().await;
    s.ingest_b(12_000).await;
    let analyzes = manual_analyzes(&mut s.conn).await;

    s.ingest_b(12_100).await;

    assert_eq!(
        manual_analyzes(&mut s.conn).await,
        analyzes,
        "the second pass found the estimate close enough"
    );
}

/// Below 10,000 rows a stale estimate is left to autovacuum.
#[tokio::test]
async fn a_customer_below_ten_thousand_rows_is_never_analyzed() {
    let mut s = Setup::new().await;
    let analyzes = manual_analyzes(&mut s.conn).await;

    s.ingest_b(9_000).await;

    assert_eq!(manual_analyzes(&mut s.conn).await, analyzes);
}
