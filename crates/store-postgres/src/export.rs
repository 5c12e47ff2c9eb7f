//! The findings export: every matching finding, read in pages from one snapshot.
//!
//! The cursor owns a connection taken out of the pool and opens a `REPEATABLE READ READ
//! ONLY` transaction on it, so the total and every page see the same data even while a pass
//! commits. Pages are keyset-paginated on the primary key (`id > last`), each a prepared
//! query of [`PAGE_ROWS`] rows. When the cursor is dropped before the end (the client went
//! away), the connection is closed with it: PostgreSQL ends the transaction.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    CustomerScope, Result,
    finding::{Finding, FindingFilter},
    ports::FindingBatches,
};
use uuid::Uuid;

use crate::{
    PgStore,
    error::db_error,
    findings::{FindingRow, FindingWithIdentity, read_finding, severity_rank, with_comments},
    identities::IdentitySummaryRow,
    schema::{findings, identities},
};

/// Findings per page.
pub(crate) const PAGE_ROWS: i64 = 1000;

pub(crate) struct PgFindingCursor {
    conn: Option<AsyncPgConnection>,
    customer: Uuid,
    filter: FindingFilter,
    total: u64,
    synced_through: Option<DateTime<Utc>>,
    last_id: Option<String>,
    /// When the export began: its triage reads as it did then.
    now: DateTime<Utc>,
}

impl PgStore {
    pub(crate) async fn open_export(
        &self,
        scope: CustomerScope,
        filter: &FindingFilter,
    ) -> Result<PgFindingCursor> {
        let pooled = self.conn().await?;
        // Out of the pool: the connection lives (and dies) with the export.
        let mut conn = diesel_async::pooled_connection::deadpool::Object::take(pooled);
        diesel::sql_query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .execute(&mut conn)
            .await
            .map_err(db_error)?;
        let customer = scope.customer_id().as_uuid();
        // In the snapshot, every row is at or before the newest committed pass.
        let synced_through = crate::sync::read_synced_through(&conn, customer)
            .await
            .map_err(db_error)?;
        let now = self.clock.now();
        let total = crate::findings::count_findings(&conn, customer, filter, None, now)
            .await
            .map_err(db_error)?;
        Ok(PgFindingCursor {
            conn: Some(conn),
            customer,
            filter: filter.clone(),
            total,
            synced_through,
            last_id: None,
            now,
        })
    }
}

#[async_trait]
impl FindingBatches for PgFindingCursor {
    fn total(&self) -> u64 {
        self.total
    }

    fn synced_through(&self) -> Option<DateTime<Utc>> {
        self.synced_through
    }

    async fn next_batch(&mut self) -> Result<Option<Vec<Finding>>> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(None);
        };
        let mut query = crate::findings::findings_joined!()
            .filter(findings::customer_id.eq(self.customer))
            .into_boxed();
        if let Some(last) = &self.last_id {
            query = query.filter(findings::id.gt(last.clone()));
        }
        if let Some(tenant) = self.filter.tenant {
            query = query.filter(findings::cloud_tenant_id.eq(tenant.as_uuid()));
        }
        if !self.filter.severities.is_empty() {
            let ranks: Vec<i16> = self
                .filter
                .severities
                .iter()
                .map(|s| severity_rank(*s))
                .collect();
            query = query.filter(findings::severity_rank.eq_any(ranks));
        }
        if !self.filter.statuses.is_empty() {
            let statuses: Vec<&str> = self.filter.statuses.iter().map(|s| s.as_str()).collect();
            query = query.filter(findings::status.eq_any(statuses));
        }
        if !self.filter.finding_types.is_empty() {
            let types: Vec<&str> = self
                .filter
                .finding_types
                .iter()
                .map(|t| t.as_str())
                .collect();
            query = query.filter(findings::finding_type.eq_any(types));
        }
        if let Some(since) = self.filter.modified_since {
            query = query.filter(findings::modified_at.gt(since));
        }
        if !self.filter.triage_states.is_empty() {
            query = query.filter(crate::findings::triage_filter!(
                self.filter.triage_states,
                self.now
            ));
        }
        let rows: Vec<FindingWithIdentity> = query
            .order(findings::id)
            .limit(PAGE_ROWS)
            .select((
                FindingRow::as_select(),
                Option::<IdentitySummaryRow>::as_select(),
            ))
            .load::<FindingWithIdentity>(conn)
            .await
            .map_err(db_error)?;
        let last = (rows.len() as i64) < PAGE_ROWS;
        self.last_id = rows.last().map(|(row, _)| row.id.clone());
        let now = self.now;
        let reads = rows
            .into_iter()
            .map(|row| read_finding(row, now))
            .collect::<Result<Vec<_>>>()?;
        // In the export's snapshot, as its rows.
        let findings = with_comments(conn, self.customer, reads)
            .await
            .map_err(db_error)?;
        if last {
            // The last page: end the transaction; the connection is closed when dropped.
            let _ = diesel::sql_query("COMMIT").execute(conn).await;
            self.conn = None;
        }
        Ok((!findings.is_empty()).then_some(findings))
    }
}
