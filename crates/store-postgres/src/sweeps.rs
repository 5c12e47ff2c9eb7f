//! The worker's retention sweeps, in batches: finished deliveries (with their attempts), the
//! bodies no delivery refers to any more, and events older than their retention.
//!
//! On one PostgreSQL node each batch is one statement over every customer. On Citus a
//! statement that locks rows or stops at a `LIMIT` must reach one shard, so a batch there
//! goes customer by customer, each delete on that customer's node: the customers with old
//! deliveries come from a statement across customers; those with events to sweep are
//! probed one by one along their primary key (a customer with none costs one index probe).

use chrono::{DateTime, Utc};
use diesel::{
    QueryableByName,
    prelude::*,
    sql_types::{BigInt, Timestamptz, Uuid as SqlUuid},
};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::Result;
use uuid::Uuid;

use crate::{
    PgStore,
    error::db_error,
    schema::customers,
    spanning::{Spanning, across_customers},
};

/// A batch of old finished deliveries and their attempts, oldest first (the foreign keys
/// are checked at the end of the statement, so both go in one). `{customer}` narrows it
/// to the customer `$3`.
fn purge_deliveries(customer: bool) -> String {
    let (old, attempts, deliveries) = if customer {
        (
            "AND customer_id = $3",
            "AND a.customer_id = $3",
            "AND d.customer_id = $3",
        )
    } else {
        ("", "", "")
    };
    format!(
        "WITH old AS ( \
             SELECT customer_id, id FROM webhook_deliveries \
             WHERE status <> 'pending' AND created_at < $1 {old} \
             ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED), \
         attempts AS ( \
             DELETE FROM webhook_attempts a USING old \
             WHERE a.customer_id = old.customer_id AND a.delivery_id = old.id {attempts}) \
         DELETE FROM webhook_deliveries d USING old \
         WHERE d.customer_id = old.customer_id AND d.id = old.id {deliveries}"
    )
}

/// A batch of kept snapshots of chunks queued before `$1` of which no delivery is left,
/// oldest first. `customer` narrows it to the customer `$3`.
fn purge_bodies(customer: bool) -> String {
    let (old, gone) = if customer {
        ("AND b.customer_id = $3", "AND kept.customer_id = $3")
    } else {
        ("", "")
    };
    format!(
        "DELETE FROM webhook_bodies kept USING ( \
             SELECT b.customer_id, b.pass_id, b.event_type, b.chunk FROM webhook_bodies b \
             WHERE b.created_at < $1 {old} \
               AND NOT EXISTS ( \
                   SELECT 1 FROM webhook_deliveries d \
                   WHERE d.customer_id = b.customer_id AND d.pass_id = b.pass_id \
                     AND d.event_type = b.event_type AND d.chunk = b.chunk) \
             ORDER BY b.created_at LIMIT $2) gone \
         WHERE kept.customer_id = gone.customer_id AND kept.pass_id = gone.pass_id \
           AND kept.event_type = gone.event_type AND kept.chunk = gone.chunk {gone}"
    )
}

/// Every customer's id, in order, for a sweep that goes customer by customer (`customers`
/// is on every node of Citus: read where the statement runs).
pub(crate) async fn customer_ids(conn: &mut AsyncPgConnection) -> QueryResult<Vec<Uuid>> {
    customers::table
        .select(customers::id)
        .order(customers::id)
        .load(conn)
        .await
}

#[derive(QueryableByName)]
struct CustomerRow {
    #[diesel(sql_type = SqlUuid)]
    customer_id: Uuid,
}

impl PgStore {
    /// Deletes at most `batch` finished deliveries created before `cutoff`, with their
    /// attempts; returns how many deliveries.
    pub(crate) async fn purge(&self, cutoff: DateTime<Utc>, batch: u32) -> Result<u64> {
        self.delete_in_batches(
            (cutoff, batch),
            "SELECT customer_id FROM webhook_deliveries \
             WHERE status <> 'pending' AND created_at < $1 \
             GROUP BY customer_id ORDER BY min(created_at) LIMIT $2",
            purge_deliveries,
        )
        .await
    }

    /// Deletes at most `batch` kept snapshots of chunks queued before `cutoff` that no
    /// delivery refers to any more (the retention sweep deleted every delivery of the
    /// chunk); returns how many.
    pub(crate) async fn purge_bodies(&self, cutoff: DateTime<Utc>, batch: u32) -> Result<u64> {
        self.delete_in_batches(
            (cutoff, batch),
            // The customers with a body to delete: one a delivery still reads is not, and
            // many such would otherwise fill the list and hold the others' back for good.
            "SELECT b.customer_id FROM webhook_bodies b WHERE b.created_at < $1 \
               AND NOT EXISTS ( \
                   SELECT 1 FROM webhook_deliveries d \
                   WHERE d.customer_id = b.customer_id AND d.pass_id = b.pass_id \
                     AND d.event_type = b.event_type AND d.chunk = b.chunk) \
             GROUP BY b.customer_id ORDER BY min(b.created_at) LIMIT $2",
            purge_bodies,
        )
        .await
    }

    /// Runs the batch `statement(false)` (`$1` the cutoff, `$2` the batch) on one node; on
    /// Citus, `statement(true)` (`$3` the customer) for each customer `customers` names (the
    /// sweep's statement across customers, `$1` and `$2` as well) until `batch` rows are
    /// deleted. Returns how many.
    async fn delete_in_batches(
        &self,
        (cutoff, batch): (DateTime<Utc>, u32),
        customers: &'static str,
        statement: fn(bool) -> String,
    ) -> Result<u64> {
        let mut conn = self.conn().await?;
        if !self.on_citus(&mut conn).await.map_err(db_error)? {
            let deleted = diesel::sql_query(statement(false))
                .bind::<Timestamptz, _>(cutoff)
                .bind::<BigInt, _>(i64::from(batch))
                .execute(&mut conn)
                .await
                .map_err(db_error)?;
            return Ok(deleted as u64);
        }
        let customers: Vec<CustomerRow> =
            across_customers(&mut conn, Spanning::DeliveryRetention, |conn| {
                Box::pin(
                    diesel::sql_query(customers)
                        .bind::<Timestamptz, _>(cutoff)
                        .bind::<BigInt, _>(i64::from(batch))
                        .load(conn),
                )
            })
            .await
            .map_err(db_error)?;
        let mut deleted = 0_u64;
        for CustomerRow { customer_id } in customers {
            let left = u64::from(batch).saturating_sub(deleted);
            if left == 0 {
                break;
            }
            deleted += diesel::sql_query(statement(true))
                .bind::<Timestamptz, _>(cutoff)
                .bind::<BigInt, _>(left as i64)
                .bind::<SqlUuid, _>(customer_id)
                .execute(&mut conn)
                .await
                .map_err(db_error)? as u64;
        }
        Ok(deleted)
    }

    /// Deletes at most `batch` events created before `cutoff`; returns how many.
    ///
    /// Customer by customer along the primary key (an id's prefix is its time): the events
    /// of the milliseconds before the cutoff's. No row locks (events are never updated, and
    /// the runtime role may not): two workers sweeping at once pick the same rows, and the
    /// second deletes what is left of them.
    pub(crate) async fn sweep_events(&self, cutoff: DateTime<Utc>, batch: u32) -> Result<u64> {
        let mut conn = self.conn().await?;
        if !self.on_citus(&mut conn).await.map_err(db_error)? {
            let deleted = diesel::sql_query(
                "DELETE FROM finding_events e USING ( \
                     SELECT old.customer_id, old.id FROM customers c CROSS JOIN LATERAL ( \
                         SELECT customer_id, id FROM finding_events \
                         WHERE customer_id = c.id AND id < posture_event_floor($1) \
                         ORDER BY id LIMIT $2) old \
                     LIMIT $2) old \
                 WHERE e.customer_id = old.customer_id AND e.id = old.id",
            )
            .bind::<Timestamptz, _>(cutoff)
            .bind::<BigInt, _>(i64::from(batch))
            .execute(&mut conn)
            .await
            .map_err(db_error)?;
            return Ok(deleted as u64);
        }
        let customers = customer_ids(&mut conn).await.map_err(db_error)?;
        let mut deleted = 0_u64;
        for customer in customers {
            let left = u64::from(batch).saturating_sub(deleted);
            if left == 0 {
                break;
            }
            deleted += delete_old_events(&mut conn, customer, cutoff, left)
                .await
                .map_err(db_error)? as u64;
        }
        Ok(deleted)
    }
}

/// At most `limit` of the customer's events created before `cutoff`, on its node.
async fn delete_old_events(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    cutoff: DateTime<Utc>,
    limit: u64,
) -> QueryResult<usize> {
    diesel::sql_query(
        "DELETE FROM finding_events e USING ( \
             SELECT customer_id, id FROM finding_events \
             WHERE customer_id = $1 AND id < posture_event_floor($2) \
             ORDER BY id LIMIT $3) old \
         WHERE e.customer_id = $1 AND e.customer_id = old.customer_id AND e.id = old.id",
    )
    .bind::<SqlUuid, _>(customer)
    .bind::<Timestamptz, _>(cutoff)
    .bind::<BigInt, _>(i64::try_from(limit).unwrap_or(i64::MAX))
    .execute(conn)
    .await
}
