//! Planner statistics after a pass.
//!
//! Every customer-scoped query filters on `customer_id`, and PostgreSQL estimates how many
//! rows a customer has from the statistics of the last `ANALYZE`. A customer whose first
//! large pass has not been analyzed yet is estimated at a handful of rows, and the planner
//! then picks plans that are right for a handful: a page fetch by ids (the list routes,
//! webhook payloads) scans all the customer's rows through the narrowest index and filters
//! them: for 100,000 rows 25–30 ms on an idle server and 100–140 ms under the worker's load,
//! instead of well under 1 ms. Autovacuum only analyzes a table once about 10 % of it has
//! changed, so in a large table a new customer can stay mis-estimated for good.
//!
//! After a pass commits, the planner's estimate for the customer is compared with the
//! customer's real row count; when it is off by [`STALE_FACTOR`] or more for a customer of
//! [`MIN_ROWS`] or more, the customer column is analyzed (a sample of the table: about
//! 0.25 s for 1,000,000 findings). The estimate comes from `EXPLAIN`, so this follows
//! whatever the planner would really use. A failure here is logged, never fatal: the pass
//! is already committed.

use diesel::{QueryableByName, sql_types::Json};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::CustomerScope;

/// Analyze when the estimate is this many times below the real count...
const STALE_FACTOR: f64 = 10.0;
/// ...and the customer has at least this many rows. Below it a mis-planned page fetch costs
/// a few milliseconds (measured: 2 ms at 1,000 rows, 4–6 ms at 5,000, 8–10 ms at 20,000,
/// 25–30 ms at 100,000), and autovacuum's next analyze corrects it: every pass rewrites the
/// rows it reports, so an active table is analyzed often.
const MIN_ROWS: i64 = 10_000;

/// A customer-scoped table and how to count the customer's rows cheaply.
struct Table {
    name: &'static str,
    count_sql: &'static str,
}

const FINDINGS: Table = Table {
    name: "findings",
    count_sql: "SELECT COALESCE(SUM(total), 0)::int8 AS n FROM finding_totals WHERE customer_id = $1",
};

const IDENTITIES: Table = Table {
    name: "identities",
    count_sql: "SELECT COALESCE(SUM(total), 0)::int8 AS n FROM identity_totals WHERE customer_id = $1",
};

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::Int8)]
    n: i64,
}

#[derive(QueryableByName)]
struct Explained {
    #[diesel(sql_type = Json, column_name = "QUERY PLAN")]
    plan: serde_json::Value,
}

/// Whether an estimate of `estimated` rows is stale for `actual` real rows.
fn is_stale(estimated: f64, actual: i64) -> bool {
    actual >= MIN_ROWS && estimated * STALE_FACTOR <= actual as f64
}

/// Rows the planner expects for the customer in `table`.
async fn estimate(
    conn: &mut AsyncPgConnection,
    table: &Table,
    scope: CustomerScope,
) -> diesel::QueryResult<f64> {
    // The uuid is formatted from its type, not from input: nothing to escape. A literal (not
    // a parameter) so that the estimate is the one a custom plan for this customer gets.
    let explained: Explained = diesel::sql_query(format!(
        "EXPLAIN (FORMAT JSON) SELECT 1 FROM {} WHERE customer_id = '{}'",
        table.name,
        scope.customer_id().as_uuid()
    ))
    .get_result(conn)
    .await?;
    Ok(planned_rows(&explained.plan).unwrap_or(f64::MAX))
}

/// The rows a plan of `EXPLAIN (FORMAT JSON)` expects; on Citus, those the plan of the
/// customer's shard expects (the coordinator's own node only gathers what it sends back).
pub fn planned_rows(plan: &serde_json::Value) -> Option<f64> {
    let top = &plan[0]["Plan"];
    // Citus nests the task's own EXPLAIN output (an array of one plan) in an array.
    let remote = &top["Distributed Query"]["Job"]["Tasks"][0]["Remote Plan"][0][0]["Plan"];
    remote["Plan Rows"]
        .as_f64()
        .or_else(|| top["Plan Rows"].as_f64())
}

async fn refresh_table(
    conn: &mut AsyncPgConnection,
    table: &Table,
    scope: CustomerScope,
) -> diesel::QueryResult<()> {
    let actual = diesel::sql_query(table.count_sql)
        .bind::<diesel::sql_types::Uuid, _>(scope.customer_id().as_uuid())
        .get_result::<Count>(conn)
        .await?
        .n;
    if actual < MIN_ROWS {
        return Ok(());
    }
    let estimated = estimate(conn, table, scope).await?;
    if is_stale(estimated, actual) {
        let started = std::time::Instant::now();
        // Through the owner's function: the runtime role may not ANALYZE (migrations 000009,
        // 000017: on Citus it runs on the node of the customer's shard, and analyzes it).
        diesel::sql_query("SELECT posture_analyze($1, $2)")
            .bind::<diesel::sql_types::Uuid, _>(scope.customer_id().as_uuid())
            .bind::<diesel::sql_types::Text, _>(table.name)
            .execute(conn)
            .await?;
        tracing::info!(
            table = table.name,
            customer.id = %scope.customer_id(),
            rows = actual,
            estimated,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "refreshed planner statistics after a pass"
        );
    }
    Ok(())
}

/// Refreshes the statistics of the tables a committed pass wrote to, where stale.
pub(super) async fn refresh_after_pass(
    conn: &mut AsyncPgConnection,
    scope: CustomerScope,
    wrote_findings: bool,
    wrote_identities: bool,
) {
    for (wrote, table) in [(wrote_findings, &FINDINGS), (wrote_identities, &IDENTITIES)] {
        if !wrote {
            continue;
        }
        if let Err(e) = refresh_table(conn, table, scope).await {
            tracing::warn!(table = table.name, error = %e, "could not refresh planner statistics after a pass");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rows_planned_are_the_shards_on_citus() {
        let local = serde_json::json!([{"Plan": {"Node Type": "Index Only Scan", "Plan Rows": 7}}]);
        assert_eq!(planned_rows(&local), Some(7.0));
        let citus = serde_json::json!([{"Plan": {
            "Node Type": "Custom Scan", "Plan Rows": 0,
            "Distributed Query": {"Job": {"Tasks": [{"Remote Plan": [[{"Plan": {
                "Node Type": "Index Only Scan", "Plan Rows": 12000
            }}]]}]}}
        }}]);
        assert_eq!(planned_rows(&citus), Some(12000.0));
    }

    #[test]
    fn an_estimate_ten_times_below_the_count_is_stale() {
        assert!(is_stale(1.0, 100_000));
        assert!(is_stale(2_000.0, 20_000));
        assert!(!is_stale(2_001.0, 20_000));
        assert!(
            !is_stale(40_000.0, 30_000),
            "an overestimate is not refreshed"
        );
    }

    #[test]
    fn small_customers_are_never_analyzed() {
        assert!(!is_stale(1.0, MIN_ROWS - 1));
        assert!(is_stale(1.0, MIN_ROWS));
    }
}
