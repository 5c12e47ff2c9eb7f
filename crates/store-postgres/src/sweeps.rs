//! The worker's retention sweeps, in batches: finished deliveries (with their attempts)
//! and events older than their retention.
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
        let mut conn = self.conn().await?;
        if !self.on_citus(&mut conn).await.map_err(db_error)? {
            let deleted = diesel::sql_query(purge_deliveries(false))
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
                    diesel::sql_query(
                        "SELECT customer_id FROM webhook_deliveries \
                         WHERE status <> 'pending' AND created_at < $1 \
                         GROUP BY customer_id ORDER BY min(created_at) LIMIT $2",
                    )
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
            deleted += diesel::sql_query(purge_deliveries(true))
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
