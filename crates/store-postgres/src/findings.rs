//! Findings: list (filtered, ordered, paged) and detail, each with the affected identity.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::{dsl::sum, prelude::*};
use diesel_async::RunQueryDsl;
use posture_domain::{
    CloudTenantId, CustomerScope, Error, FindingId, Page, PageRequest, Result,
    finding::{Finding, FindingFilter, Severity},
    identity::IdentitySummary,
    ports::FindingRepository,
};
use uuid::Uuid;

use crate::{
    PgStore,
    error::{corrupt, db_error},
    identities::IdentitySummaryRow,
    schema::{finding_totals, findings, identities},
};

#[derive(Queryable, Selectable)]
#[diesel(table_name = findings, check_for_backend(diesel::pg::Pg))]
pub(crate) struct FindingRow {
    pub(crate) id: String,
    cloud_tenant_id: Uuid,
    finding_type: String,
    severity: String,
    status: String,
    title: String,
    description: Option<String>,
    detected_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

/// A finding row and its identity (absent when the finding names none).
pub(crate) type FindingWithIdentity = (FindingRow, Option<IdentitySummaryRow>);

pub(crate) fn to_finding((row, identity): FindingWithIdentity) -> Result<Finding> {
    Ok(Finding {
        id: row.id.parse().map_err(|e| corrupt("finding id", e))?,
        cloud_tenant_id: CloudTenantId::from_uuid(row.cloud_tenant_id),
        finding_type: row
            .finding_type
            .parse()
            .map_err(|e| corrupt("finding type", e))?,
        severity: row.severity.parse().map_err(|e| corrupt("severity", e))?,
        status: row.status.parse().map_err(|e| corrupt("status", e))?,
        title: row.title,
        description: row.description,
        identity: identity.map(IdentitySummary::try_from).transpose()?,
        detected_at: row.detected_at,
        updated_at: row.updated_at,
    })
}

/// `rows` in the order of `ids` (each id once; ids without a row are skipped), in one pass.
fn in_order<S: AsRef<str>>(ids: &[S], rows: Vec<FindingWithIdentity>) -> Vec<FindingWithIdentity> {
    let position: std::collections::HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_ref(), i))
        .collect();
    let mut slots: Vec<Option<FindingWithIdentity>> = (0..ids.len()).map(|_| None).collect();
    for row in rows {
        if let Some(&i) = position.get(row.0.id.as_str()) {
            slots[i] = Some(row);
        }
    }
    slots.into_iter().flatten().collect()
}

/// The rank stored in `severity_rank` (the list order: most severe first).
pub(crate) fn severity_rank(severity: Severity) -> i16 {
    match severity {
        Severity::Critical => 1,
        Severity::High => 2,
        Severity::Medium => 3,
        Severity::Low => 4,
    }
}

/// Findings of the customer with `filter` applied (no join: it serves index-only scans).
macro_rules! filtered_findings {
    ($customer:expr, $filter:expr) => {{
        let mut query = findings::table
            .filter(findings::customer_id.eq($customer))
            .into_boxed();
        let filter: &FindingFilter = $filter;
        if let Some(tenant) = filter.tenant {
            query = query.filter(findings::cloud_tenant_id.eq(tenant.as_uuid()));
        }
        if !filter.severities.is_empty() {
            // The rank is in the list index, so the filter narrows the index scan.
            let ranks: Vec<i16> = filter
                .severities
                .iter()
                .map(|s| severity_rank(*s))
                .collect();
            query = query.filter(findings::severity_rank.eq_any(ranks));
        }
        if !filter.statuses.is_empty() {
            let statuses: Vec<&str> = filter.statuses.iter().map(|s| s.as_str()).collect();
            query = query.filter(findings::status.eq_any(statuses));
        }
        if !filter.finding_types.is_empty() {
            let types: Vec<&str> = filter.finding_types.iter().map(|t| t.as_str()).collect();
            query = query.filter(findings::finding_type.eq_any(types));
        }
        query
    }};
}

/// Findings with their identity, by id (the rows of one page).
macro_rules! findings_with_identity {
    ($customer:expr) => {
        findings::table
            .left_join(
                identities::table.on(identities::customer_id
                    .eq(findings::customer_id)
                    .and(identities::id.nullable().eq(findings::identity_id))),
            )
            .filter(findings::customer_id.eq($customer))
            .select((
                FindingRow::as_select(),
                Option::<IdentitySummaryRow>::as_select(),
            ))
    };
}

/// `meta.total`: summed from the per-pass totals, never counted over the findings.
pub(crate) fn total_query(
    customer: Uuid,
    filter: &FindingFilter,
) -> finding_totals::BoxedQuery<
    'static,
    diesel::pg::Pg,
    diesel::sql_types::Nullable<diesel::sql_types::BigInt>,
> {
    let mut query = finding_totals::table
        .filter(finding_totals::customer_id.eq(customer))
        .select(sum(finding_totals::total))
        .into_boxed();
    if let Some(tenant) = filter.tenant {
        query = query.filter(finding_totals::cloud_tenant_id.eq(tenant.as_uuid()));
    }
    if !filter.severities.is_empty() {
        let values: Vec<&'static str> = filter.severities.iter().map(|s| s.as_str()).collect();
        query = query.filter(finding_totals::severity.eq_any(values));
    }
    if !filter.statuses.is_empty() {
        let values: Vec<&'static str> = filter.statuses.iter().map(|s| s.as_str()).collect();
        query = query.filter(finding_totals::status.eq_any(values));
    }
    if !filter.finding_types.is_empty() {
        let values: Vec<String> = filter
            .finding_types
            .iter()
            .map(|t| t.as_str().to_owned())
            .collect();
        query = query.filter(finding_totals::finding_type.eq_any(values));
    }
    query
}

#[async_trait]
impl FindingRepository for PgStore {
    async fn list_findings(
        &self,
        scope: CustomerScope,
        filter: &FindingFilter,
        page: PageRequest,
    ) -> Result<Page<Finding>> {
        let customer = scope.customer_id().as_uuid();
        let conn = self.conn().await?;
        // A deferred join: the page's ids first (an index-only scan, however deep the
        // offset), then only those rows with their identity.
        let ids = filtered_findings!(customer, filter)
            .order((
                findings::severity_rank,
                findings::detected_at.desc(),
                findings::id,
            ))
            .limit(i64::from(page.limit()))
            .offset(page.offset() as i64)
            .select(findings::id)
            .load::<String>(&mut &*conn);
        let total = total_query(customer, filter).get_result::<Option<i64>>(&mut &*conn);
        let (ids, total) = futures_util::future::try_join(ids, total)
            .await
            .map_err(db_error)?;
        let rows = if ids.is_empty() {
            Vec::new()
        } else {
            findings_with_identity!(customer)
                .filter(findings::id.eq_any(&ids))
                .load::<FindingWithIdentity>(&mut &*conn)
                .await
                .map_err(db_error)?
        };
        Ok(Page {
            items: in_order(&ids, rows)
                .into_iter()
                .map(to_finding)
                .collect::<Result<_>>()?,
            total: total.unwrap_or(0) as u64,
        })
    }

    async fn findings_by_ids(
        &self,
        scope: CustomerScope,
        ids: &[FindingId],
    ) -> Result<Vec<Finding>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let customer = scope.customer_id().as_uuid();
        let wanted: Vec<&str> = ids.iter().map(FindingId::as_str).collect();
        let mut conn = self.conn().await?;
        let rows = findings_with_identity!(customer)
            .filter(findings::id.eq_any(&wanted))
            .load::<FindingWithIdentity>(&mut conn)
            .await
            .map_err(db_error)?;
        in_order(&wanted, rows)
            .into_iter()
            .map(to_finding)
            .collect()
    }

    async fn export_findings(
        &self,
        scope: CustomerScope,
        filter: &FindingFilter,
    ) -> Result<Box<dyn posture_domain::ports::FindingBatches>> {
        Ok(Box::new(self.open_export(scope, filter).await?))
    }

    async fn get_finding(&self, scope: CustomerScope, id: &FindingId) -> Result<Finding> {
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        let row = findings::table
            .left_join(
                identities::table.on(identities::customer_id
                    .eq(findings::customer_id)
                    .and(identities::id.nullable().eq(findings::identity_id))),
            )
            .filter(findings::customer_id.eq(customer))
            .filter(findings::id.eq(id.as_str()))
            .select((
                FindingRow::as_select(),
                Option::<IdentitySummaryRow>::as_select(),
            ))
            .get_result::<FindingWithIdentity>(&mut conn)
            .await
            .optional()
            .map_err(db_error)?
            .ok_or(Error::NotFound)?;
        to_finding(row)
    }
}
