//! The statements that deliberately read or write rows of many customers: the worker's
//! claims, sweeps and gauges, and the operator's re-sealing of secrets. Every other
//! statement of posture names one customer, and on Citus runs on the one node that holds
//! that customer's shards; these run on every node (multi-shard).
//!
//! Each runs through [`across_customers`], which tells Citus so for its transaction
//! (`citus.multi_task_query_log_level` off): an operator may set that level to `error` or
//! `warning` for posture's runtime role and so hear of any other statement that spans
//! shards (the test suite on Citus does: docs/operations.md, "Running on Citus"). On
//! PostgreSQL without Citus the setting is an inert placeholder.

use diesel::QueryResult;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::future::BoxFuture;

/// Why a statement spans customers: each of posture's cross-customer statements, listed
/// with its reason in docs/operations.md (a test compares the two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spanning {
    /// The worker finds the customers with deliveries due.
    DueCustomers,
    /// The worker cancels due deliveries whose subscription was deactivated meanwhile.
    OrphanedDeliveries,
    /// The worker's queue gauges.
    QueueDepth,
    /// The worker's ingest gauges: the passes of every customer finished lately.
    RecentPasses,
    /// The worker's retention sweep of finished deliveries.
    DeliveryRetention,
    /// The worker's retention sweep of the events feed.
    EventRetention,
    /// The worker disables subscriptions whose every attempt failed for days.
    DisableFailing,
    /// The worker ends expired pauses and previous signing secrets.
    ExpireHolds,
    /// The worker finds the customers with triage marks past their expiry.
    TriageExpiry,
    /// `posture-api secrets reseal`: every sealed secret, re-sealed under the new key.
    Reseal,
    /// `posture-api deliveries retry`: the customer of a delivery named by its id alone.
    DeliveryById,
    /// `posture-api customers usage` and the worker's usage gauges: each customer's rows.
    StorageUsage,
}

impl Spanning {
    /// Every one of them.
    pub const ALL: [Spanning; 12] = [
        Spanning::DueCustomers,
        Spanning::OrphanedDeliveries,
        Spanning::QueueDepth,
        Spanning::RecentPasses,
        Spanning::DeliveryRetention,
        Spanning::EventRetention,
        Spanning::DisableFailing,
        Spanning::ExpireHolds,
        Spanning::TriageExpiry,
        Spanning::Reseal,
        Spanning::DeliveryById,
        Spanning::StorageUsage,
    ];

    /// What it does, as docs/operations.md lists it.
    pub fn what(self) -> &'static str {
        match self {
            Spanning::DueCustomers => "the worker's claim: which customers have deliveries due",
            Spanning::OrphanedDeliveries => {
                "the worker's claim: cancelling due deliveries of deactivated subscriptions"
            }
            Spanning::QueueDepth => "the worker's queue gauges",
            Spanning::RecentPasses => "the worker's ingest gauges (passes finished lately)",
            Spanning::DeliveryRetention => "the worker's retention sweep of finished deliveries",
            Spanning::EventRetention => "the worker's retention sweep of the events feed",
            Spanning::DisableFailing => "the worker disabling subscriptions failing for days",
            Spanning::ExpireHolds => {
                "the worker ending expired pauses and previous signing secrets"
            }
            Spanning::TriageExpiry => {
                "the worker's triage sweep: which customers have marks past their expiry"
            }
            Spanning::Reseal => "`posture-api secrets reseal`, every customer's secrets",
            Spanning::DeliveryById => {
                "`posture-api deliveries retry`: the customer of a delivery named by its id"
            }
            Spanning::StorageUsage => {
                "`posture-api customers usage` and the worker's usage gauges: each customer's rows"
            }
        }
    }
}

/// Runs `f`, statements that span customers for the reason `why`, in a transaction that
/// lets Citus run them on every node.
pub(crate) async fn across_customers<T, F>(
    conn: &mut AsyncPgConnection,
    why: Spanning,
    f: F,
) -> QueryResult<T>
where
    T: Send,
    F: for<'c> FnOnce(&'c mut AsyncPgConnection) -> BoxFuture<'c, QueryResult<T>> + Send,
{
    tracing::trace!(?why, "a statement across customers");
    conn.transaction(async |conn| {
        diesel::sql_query("SET LOCAL citus.multi_task_query_log_level TO off")
            .execute(conn)
            .await?;
        f(conn).await
    })
    .await
}

impl crate::PgStore {
    /// Whether the database is a Citus coordinator (has the `citus` extension): asked once.
    /// The worker's claims take another path there ([`crate::deliveries`]).
    pub(crate) async fn on_citus(&self, conn: &mut AsyncPgConnection) -> QueryResult<bool> {
        #[derive(diesel::QueryableByName)]
        struct Citus {
            #[diesel(sql_type = diesel::sql_types::Bool)]
            present: bool,
        }
        self.citus
            .get_or_try_init(|| async {
                diesel::sql_query(
                    "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') \
                     AS present",
                )
                .get_result::<Citus>(conn)
                .await
                .map(|c| c.present)
            })
            .await
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_list_every_statement_across_customers() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/operations.md"
        ))
        .expect("docs/operations.md");
        let section = doc
            .split("<!-- spanning:begin -->")
            .nth(1)
            .and_then(|rest| rest.split("<!-- spanning:end -->").next())
            .expect("the list of statements across customers in docs/operations.md");
        let listed = section.lines().filter(|l| l.starts_with("| ")).count() - 1;
        assert_eq!(listed, Spanning::ALL.len(), "one row each:\n{section}");
        for why in Spanning::ALL {
            assert!(
                section.contains(why.what()),
                "docs/operations.md does not list {why:?}: {}",
                why.what()
            );
        }
    }
}
