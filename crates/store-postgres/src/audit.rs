//! The customer's audit feed (`GET /api/v1/audit-events`): the audit log read oldest first
//! after a cursor, and its retention sweep.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::{
    prelude::*,
    sql_types::{BigInt, Timestamptz, Uuid as SqlUuid},
};
use diesel_async::AsyncConnection as _;
use diesel_async::RunQueryDsl;
use posture_domain::{
    CustomerScope, Error, KeyId, Result,
    audit::{AuditAction, AuditFilter, AuditPage, aggregate_id, hour_of},
    console::Actor,
    credential::INACTIVITY_DAYS,
    ports::AuditRepository,
};

use crate::{
    PgStore,
    api_keys::{NamedKey, credential_line},
    console::{AuditRow, to_audit_event},
    error::db_error,
    schema::{console_audit, customers},
    sweeps::customer_ids,
};

#[derive(QueryableByName)]
struct Cutoff {
    #[diesel(sql_type = Timestamptz)]
    cutoff: DateTime<Utc>,
}

/// The time before which every line of the log is committed, at most `settled`: a line is
/// stamped when it is inserted, at or after its transaction began, so no transaction still
/// writing to the log (holding its insert lock) can commit a line older than the oldest of
/// their beginnings. (A transaction that wrote a line holds the feed back until it ends;
/// others, however long, do not.)
async fn committed_before(
    conn: &mut diesel_async::AsyncPgConnection,
    settled: DateTime<Utc>,
) -> diesel::QueryResult<DateTime<Utc>> {
    let row: Cutoff = diesel::sql_query(
        "SELECT least($1, coalesce((SELECT min(a.xact_start) \
                                    FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
                                    WHERE l.database = (SELECT oid FROM pg_database \
                                                        WHERE datname = current_database()) \
                                      AND l.relation = 'console_audit'::regclass \
                                      AND l.mode = 'RowExclusiveLock' \
                                      AND a.pid <> pg_backend_pid()), $1)) AS cutoff",
    )
    .bind::<Timestamptz, _>(settled)
    .get_result(conn)
    .await?;
    Ok(row.cutoff)
}

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
        let cutoff = committed_before(&mut conn, settled)
            .await
            .map_err(db_error)?;
        let mut query = console_audit::table
            .filter(console_audit::customer_id.eq(customer))
            .filter(console_audit::at.lt(cutoff))
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
                     WHERE customer_id = $1 \
                       AND at < least($2, now() - interval '30 days 1 minute') \
                     ORDER BY at LIMIT $3) old \
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

    async fn notice_inactive_soon(&self, now: DateTime<Utc>) -> Result<u64> {
        self.write_inactivity_notices(now).await
    }

    async fn inactivity(&self, scope: CustomerScope) -> Result<Option<u32>> {
        let mut conn = self.conn().await?;
        let days: Option<i32> = customers::table
            .find(scope.customer_id().as_uuid())
            .select(customers::inactivity_days)
            .first(&mut conn)
            .await
            .optional()
            .map_err(db_error)?
            .ok_or(Error::NotFound)?;
        Ok(days.and_then(|d| u32::try_from(d).ok()))
    }

    async fn set_inactivity(
        &self,
        scope: CustomerScope,
        days: Option<u32>,
        by: &Actor,
    ) -> Result<()> {
        if let Some(days) = days
            && !INACTIVITY_DAYS.contains(&days)
        {
            return Err(Error::invalid(
                "inactivityDays",
                format!(
                    "must be {} to {} days (or none)",
                    INACTIVITY_DAYS.start(),
                    INACTIVITY_DAYS.end()
                ),
            ));
        }
        let customer = scope.customer_id().as_uuid();
        let stored = days.map(|d| i32::try_from(d).unwrap_or(i32::MAX));
        let mut conn = self.conn().await?;
        conn.transaction(async |conn| {
            let before: Option<Option<i32>> = customers::table
                .find(customer)
                .select(customers::inactivity_days)
                .for_update()
                .first(conn)
                .await
                .optional()?;
            let Some(before) = before else {
                return Ok(Err(Error::NotFound));
            };
            if before == stored {
                return Ok(Ok(()));
            }
            diesel::update(customers::table.find(customer))
                .set(customers::inactivity_days.eq(stored))
                .execute(conn)
                .await?;
            // Every process forgets its cached keys, as on a revocation: each is cached
            // until it lapses under the rule it was read with.
            diesel::sql_query("SELECT pg_notify('posture_keys', '')")
                .execute(conn)
                .await?;
            let says = |d: Option<i32>| {
                d.map_or_else(|| "never".to_owned(), |d| format!("after {d} days unused"))
            };
            let detail = format!(
                "credentials stop working {} (was {})",
                says(stored),
                says(before)
            );
            crate::console::audit_line(conn, customer, by, "inactivity.set", Some(detail)).await?;
            Ok::<_, diesel::result::Error>(Ok(()))
        })
        .await
        .map_err(db_error)??;
        // A cached key is valid until it lapses under the rule it was cached with.
        self.key_cache.invalidate();
        Ok(())
    }
}

/// A credential past the notice of its inactivity: `(id, customer, name, prefix, last use
/// or issue)`.
#[derive(QueryableByName)]
struct Lapsing {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: uuid::Uuid,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    customer_id: uuid::Uuid,
    #[diesel(sql_type = diesel::sql_types::Text)]
    name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    prefix: String,
    #[diesel(sql_type = Timestamptz)]
    used: DateTime<Utc>,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    days: i32,
}

impl PgStore {
    pub(crate) async fn write_inactivity_notices(&self, now: DateTime<Utc>) -> Result<u64> {
        let mut conn = self.conn().await?;
        // Keys and customers are on one node (the coordinator on Citus); the notices go to
        // each customer's audit log, on its node.
        let lapsing: Vec<Lapsing> = diesel::sql_query(
            "SELECT k.id, k.customer_id, k.name, k.prefix, \
                    coalesce(k.last_used_at, k.created_at) AS used, c.inactivity_days AS days \
             FROM api_keys k JOIN customers c ON c.id = k.customer_id \
             WHERE c.inactivity_days IS NOT NULL AND k.revoked_at IS NULL \
               AND (k.expires_at IS NULL OR k.expires_at > $1) \
               AND coalesce(k.last_used_at, k.created_at) \
                   <= $1 - make_interval(days => c.inactivity_days \
                                                 - least(7, c.inactivity_days / 2)) \
               AND coalesce(k.last_used_at, k.created_at) \
                   > $1 - make_interval(days => c.inactivity_days) \
             ORDER BY coalesce(k.last_used_at, k.created_at) LIMIT 10000",
        )
        .bind::<Timestamptz, _>(now)
        .load(&mut conn)
        .await
        .map_err(db_error)?;
        let mut written = 0;
        for credential in lapsing {
            let action = AuditAction::for_credential(
                &credential.prefix,
                AuditAction::KeyInactiveSoon,
                AuditAction::ClientInactiveSoon,
            );
            let key = KeyId::from_uuid(credential.id);
            // Once per credential and last use: the hour of that use names the notice.
            let id = aggregate_id(action, key, None, hour_of(credential.used));
            let lapses = credential.used + chrono::TimeDelta::days(i64::from(credential.days));
            let named = NamedKey {
                id: credential.id,
                customer: credential.customer_id,
                name: &credential.name,
                prefix: &credential.prefix,
            };
            let detail = format!(
                "unused since {}: stops working at {} (the customer's rule: {} days unused)",
                credential.used.format("%Y-%m-%dT%H:%M:%SZ"),
                lapses.format("%Y-%m-%dT%H:%M:%SZ"),
                credential.days
            );
            credential_line(
                &mut conn,
                id,
                &named,
                action.as_str(),
                &Actor::System,
                Some(detail),
            )
            .await
            .map_err(db_error)?;
            written += 1;
        }
        Ok(written)
    }
}
