//! How the analyzer's passes went lately, over every customer: the worker's ingest gauges.

use async_trait::async_trait;
use diesel::{QueryableByName, sql_types};
use diesel_async::RunQueryDsl;
use posture_domain::{Error, ingest::RecentPasses, ports::PassStatistics};

use crate::{
    PgStore,
    error::db_error,
    spanning::{Spanning, across_customers},
};

#[async_trait]
impl PassStatistics for PgStore {
    async fn recent_passes(&self, window: std::time::Duration) -> Result<RecentPasses, Error> {
        #[derive(QueryableByName)]
        struct Recent {
            #[diesel(sql_type = sql_types::BigInt)]
            count: i64,
            #[diesel(sql_type = sql_types::Double)]
            median: f64,
            #[diesel(sql_type = sql_types::Double)]
            p99: f64,
            #[diesel(sql_type = sql_types::Double)]
            longest: f64,
            #[diesel(sql_type = sql_types::Nullable<sql_types::Double>)]
            since_last: Option<f64>,
        }
        let mut conn = self.conn().await?;
        // Both read `analyzer_passes_finished_idx`: a range of the last window, and its end.
        // The passes are gathered first (on Citus from every node), then summed up.
        let recent: Recent = across_customers(&mut conn, Spanning::RecentPasses, |conn| {
            Box::pin(
                diesel::sql_query(
                    "WITH passes AS MATERIALIZED ( \
                         SELECT extract(epoch FROM finished_at - started_at) AS seconds \
                         FROM analyzer_passes \
                         WHERE finished_at > now() - make_interval(secs => $1)), \
                     last AS MATERIALIZED (SELECT max(finished_at) AS at FROM analyzer_passes) \
                     SELECT count(*) AS count, \
                            coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds), 0) \
                                ::float8 AS median, \
                            coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY seconds), 0) \
                                ::float8 AS p99, \
                            coalesce(max(seconds), 0)::float8 AS longest, \
                            (SELECT extract(epoch FROM now() - at) FROM last)::float8 \
                                AS since_last \
                     FROM passes",
                )
                .bind::<sql_types::Double, _>(window.as_secs_f64())
                .get_result(conn),
            )
        })
        .await
        .map_err(db_error)?;
        Ok(RecentPasses {
            count: recent.count.max(0) as u64,
            median_secs: recent.median.max(0.0),
            p99_secs: recent.p99.max(0.0),
            longest_secs: recent.longest.max(0.0),
            since_last_secs: recent.since_last.map(|s| s.max(0.0)),
        })
    }
}
