//! The customer's audit feed (`GET /api/v1/audit-events`): the audit log read oldest first
//! after a cursor, and its retention sweep.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::{
    prelude::*,
    sql_types::{BigInt, Timestamptz, Uuid as SqlUuid},
};
use diesel_async::RunQueryDsl;
use posture_domain::{
    CustomerScope, Error, Result,
    audit::{AuditFilter, AuditPage},
    ports::AuditRepository,
};

use crate::{
    PgStore,
    console::{AuditRow, to_audit_event},
    error::db_error,
    schema::console_audit,
    sweeps::customer_ids,
};

#[async_trait]
impl AuditRepository for PgStore {
    async fn audit_feed(
        &self,
        scope: CustomerScope,
        filter: &AuditFilter,
        settled: DateTime<Utc>,
    ) -> Result<AuditPage> {
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        let mut query = console_audit::table
            .filter(console_audit::customer_id.eq(customer))
            .filter(console_audit::at.lt(settled))
            .order((console_audit::at, console_audit::id))
            .limit(i64::from(filter.limit) + 1)
            .select(AuditRow::as_select())
            .into_boxed();
        if !filter.types.is_empty() {
            let types: Vec<&str> = filter.types.iter().map(|t| t.as_str()).collect();
            query = query.filter(console_audit::action.eq_any(types));
        }
        if let Some(since) = filter.since {
            query = query.filter(console_audit::at.ge(since));
        }
        if let Some(after) = filter.after {
            let at: DateTime<Utc> = console_audit::table
                .find((customer, after))
                .select(console_audit::at)
                .first(&mut conn)
                .await
                .optional()
                .map_err(db_error)?
                .ok_or(Error::NotFound)?;
            query = query.filter(
                console_audit::at
                    .gt(at)
                    .or(console_audit::at.eq(at).and(console_audit::id.gt(after))),
            );
        }
        let mut rows: Vec<AuditRow> = query.load(&mut conn).await.map_err(db_error)?;
        let has_more = rows.len() > filter.limit as usize;
        rows.truncate(filter.limit as usize);
        Ok(AuditPage {
            events: rows.into_iter().map(to_audit_event).collect(),
            has_more,
        })
    }

    /// Customer by customer (each on its node on Citus), the oldest lines first; with the
    /// addresses first seen before `before` (their new-address lines go with them).
    async fn sweep_audit(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        let mut conn = self.conn().await?;
        let customers = customer_ids(&mut conn).await.map_err(db_error)?;
        let mut deleted = 0_u64;
        for customer in customers {
            let left = u64::from(batch).saturating_sub(deleted);
            if left == 0 {
                break;
            }
            let limit = i64::try_from(left).unwrap_or(i64::MAX);
            deleted += diesel::sql_query(
                "DELETE FROM console_audit a USING ( \
                     SELECT customer_id, id FROM console_audit \
                     WHERE customer_id = $1 AND at < $2 ORDER BY at LIMIT $3) old \
                 WHERE a.customer_id = $1 AND a.customer_id = old.customer_id \
                   AND a.id = old.id",
            )
            .bind::<SqlUuid, _>(customer)
            .bind::<Timestamptz, _>(before)
            .bind::<BigInt, _>(limit)
            .execute(&mut conn)
            .await
            .map_err(db_error)? as u64;
            diesel::sql_query(
                "DELETE FROM credential_addresses WHERE customer_id = $1 AND first_seen < $2",
            )
            .bind::<SqlUuid, _>(customer)
            .bind::<Timestamptz, _>(before)
            .execute(&mut conn)
            .await
            .map_err(db_error)?;
        }
        Ok(deleted)
    }
}
