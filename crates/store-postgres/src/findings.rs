//! Findings: list (filtered, ordered, paged) and detail, each with the affected identity.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::{dsl::sum, prelude::*};
use diesel_async::AsyncPgConnection;
use diesel_async::RunQueryDsl;
use posture_domain::{
    CustomerScope, Error, FindingId, KeyId, Page, PageRequest, Result,
    finding::{Finding, FindingFilter, Severity},
    page::{KeyPart, KeyReader, ListOrder, SortKey},
    ports::FindingRepository,
    triage::{TriageChange, TriageRecord},
};
use uuid::Uuid;

pub(crate) use crate::finding_rows::{
    FindingRow, FindingWithIdentity, read_finding, with_comments,
};
use crate::{
    PgStore,
    error::db_error,
    finding_rows::findings_in_order_from,
    identities::IdentitySummaryRow,
    rendered::{RenderOnce, eq_any},
    schema::{finding_totals, findings, identities},
    sync::{after_key, after_time_key, read_time_key, synced_through, time_key},
    text::At,
};

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
    ($customer:expr, $filter:expr, $now:expr) => {{
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
        if let Some(since) = filter.modified_since {
            query = query.filter(findings::modified_at.gt(since));
        }
        if !filter.triage_states.is_empty() {
            query = query.filter($crate::findings::triage_filter!(filter.triage_states, $now));
        }
        query
    }};
}

/// `triageState`: the triage as it reads at `now` (a mark past its expiry is `untriaged`).
macro_rules! triage_filter {
    ($states:expr, $now:expr) => {{
        let states: Vec<&'static str> = $states.iter().map(|s| s.as_str()).collect();
        diesel::dsl::sql::<diesel::sql_types::Bool>("(CASE WHEN findings.triage_expires_at <= ")
            .bind::<diesel::sql_types::Timestamptz, _>($now)
            .sql(" THEN 'untriaged' ELSE findings.triage_state END) = ANY(")
            .bind::<diesel::sql_types::Array<diesel::sql_types::Text>, _>(states)
            .sql(")")
    }};
}
pub(crate) use triage_filter;

/// The findings with the identity each names (their triage comments are read apart:
/// `finding_rows::with_comments`).
macro_rules! findings_joined {
    () => {
        findings::table.left_join(
            identities::table.on(identities::customer_id
                .eq(findings::customer_id)
                .and(identities::id.nullable().eq(findings::identity_id))),
        )
    };
}
pub(crate) use findings_joined;

/// Findings with their identity, by id (the rows of one page).
macro_rules! findings_with_identity {
    ($customer:expr) => {
        crate::findings::findings_joined!()
            .filter(findings::customer_id.eq($customer))
            .select((
                FindingRow::as_select(),
                Option::<IdentitySummaryRow>::as_select(),
            ))
    };
}
pub(crate) use findings_with_identity;

/// `meta.total` of a list: summed from the per-pass totals, or, for the rows modified since a
/// time (which the totals do not know), counted over the modification index (index-only).
pub(crate) async fn count_findings(
    conn: &AsyncPgConnection,
    customer: Uuid,
    filter: &FindingFilter,
    through: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> diesel::QueryResult<u64> {
    // The totals know neither modification times nor triage: those are counted over rows.
    let total = if filter.modified_since.is_some() || !filter.triage_states.is_empty() {
        let mut query = filtered_findings!(customer, filter, now);
        if let Some(through) = through {
            query = query.filter(findings::modified_at.le(through));
        }
        query.count().get_result::<i64>(&mut &*conn).await?
    } else {
        total_query(customer, filter)
            .get_result::<Option<i64>>(&mut &*conn)
            .await?
            .unwrap_or(0)
    };
    Ok(total.max(0) as u64)
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

/// A page's row ids with what their sort keys are made of, as the index gave them (the key
/// of the page's last row is where the next page starts, whatever the row holds when it is
/// read). Only that one key is ever built.
type Keyed = Vec<(String, RowKey)>;

/// The parts of a row's sort key besides its id.
#[derive(Clone, Copy)]
enum RowKey {
    /// The list's own order: severity rank, then detection (newest first).
    Natural(i16, DateTime<Utc>),
    /// The order by modification.
    Modified(DateTime<Utc>),
}

/// The sort key of a row of [`Keyed`].
fn sort_key((id, key): &(String, RowKey)) -> SortKey {
    match *key {
        RowKey::Natural(rank, detected_at) => SortKey(vec![
            KeyPart::Int(i64::from(rank)),
            KeyPart::Time(detected_at),
            KeyPart::Text(id.clone()),
        ]),
        RowKey::Modified(at) => time_key(at, id.as_str()),
    }
}

/// The ids of a page in the list's own order. After a key, the rows that follow it are three
/// ranges of the list index (same severity and detection, later id; same severity, older
/// detection; less severe), each read from its start: a page deep in the list costs what the
/// first page costs, where an offset walks every row before it.
async fn natural_ids(
    conn: &AsyncPgConnection,
    customer: Uuid,
    filter: &FindingFilter,
    page: &PageRequest,
    after: Option<(i16, DateTime<Utc>, String)>,
    now: DateTime<Utc>,
) -> diesel::QueryResult<Keyed> {
    let order = (
        findings::severity_rank,
        findings::detected_at.desc(),
        findings::id,
    );
    let Some((rank, detected_at, id)) = after else {
        return filtered_findings!(customer, filter, now)
            .order(order)
            .limit(page.fetch())
            .offset(page.offset() as i64)
            .select(NATURAL_KEY)
            .load::<NaturalKey>(&mut &*conn)
            .await
            .map(natural_keys);
    };
    let same_time = filtered_findings!(customer, filter, now)
        .filter(findings::severity_rank.eq(rank))
        .filter(findings::detected_at.eq(detected_at))
        .filter(findings::id.gt(id))
        .order(order)
        .limit(page.fetch())
        .select(NATURAL_KEY);
    let same_rank = filtered_findings!(customer, filter, now)
        .filter(findings::severity_rank.eq(rank))
        .filter(findings::detected_at.lt(detected_at))
        .order(order)
        .limit(page.fetch())
        .select(NATURAL_KEY);
    let lower_ranks = filtered_findings!(customer, filter, now)
        .filter(findings::severity_rank.gt(rank))
        .order(order)
        .limit(page.fetch())
        .select(NATURAL_KEY);
    // One statement (each range a parenthesised, limited scan), so one round trip and one
    // plan; the ranges are disjoint and in list order, sorted again here to be sure.
    let mut ids = same_time
        .union_all(same_rank)
        .union_all(lower_ranks)
        .load::<NaturalKey>(&mut &*conn)
        .await?;
    ids.sort_by(|a, b| {
        (a.1, std::cmp::Reverse(a.2), &a.0).cmp(&(b.1, std::cmp::Reverse(b.2), &b.0))
    });
    ids.truncate(page.fetch() as usize);
    Ok(natural_keys(ids))
}

/// What the natural order compares, read with the id (from the list index, index-only).
const NATURAL_KEY: (findings::id, findings::severity_rank, findings::detected_at) =
    (findings::id, findings::severity_rank, findings::detected_at);
type NaturalKey = (String, i16, At);

fn natural_keys(rows: Vec<NaturalKey>) -> Keyed {
    rows.into_iter()
        .map(|(id, rank, detected_at)| (id, RowKey::Natural(rank, detected_at.into())))
        .collect()
}

fn read_natural_key(key: &SortKey) -> Result<(i16, DateTime<Utc>, String)> {
    let mut reader = KeyReader::new(key);
    let rank = i16::try_from(reader.int()?).map_err(|_| SortKey::mismatch())?;
    let detected_at = reader.time()?;
    let id = reader.text()?.to_owned();
    reader.end()?;
    Ok((rank, detected_at, id))
}

/// The ids of a page in the order by modification, up to `through`.
async fn modified_ids(
    conn: &AsyncPgConnection,
    customer: Uuid,
    filter: &FindingFilter,
    page: &PageRequest,
    through: DateTime<Utc>,
    after: Option<(DateTime<Utc>, String)>,
    now: DateTime<Utc>,
) -> diesel::QueryResult<Keyed> {
    let mut query = filtered_findings!(customer, filter, now)
        .filter(findings::modified_at.le(through))
        .order((findings::modified_at, findings::id))
        .limit(page.fetch())
        .select((findings::id, findings::modified_at));
    match after {
        None => query = query.offset(page.offset() as i64),
        Some((modified_at, id)) => {
            query = query.filter(after_time_key!(
                "(findings.modified_at, findings.id)",
                diesel::sql_types::Text,
                modified_at,
                id
            ));
        }
    }
    let rows = query.load::<(String, At)>(&mut &*conn).await?;
    Ok(rows
        .into_iter()
        .map(|(id, at)| (id, RowKey::Modified(at.into())))
        .collect())
}

/// The keys of a page of findings (ids and sort keys, from the index), the total and the
/// pass bound: the first half of [`FindingRepository::list_findings`]'s deferred join.
async fn page_keys(
    store: &PgStore,
    conn: &AsyncPgConnection,
    customer: Uuid,
    filter: &FindingFilter,
    page: &PageRequest,
    now: DateTime<Utc>,
) -> Result<(Keyed, u64, Option<DateTime<Utc>>)> {
    let natural_after = match page.order() {
        ListOrder::Natural => after_key(page, read_natural_key)?,
        ListOrder::Modified { .. } => None,
    };
    let modified_after = match page.order() {
        ListOrder::Natural => None,
        ListOrder::Modified { .. } => after_key(page, read_time_key)?,
    };
    // A deferred join: the page's ids and keys first (an index-only scan), pipelined with
    // the total and the pass bound; then only those rows with their identity. The two
    // statements may see different snapshots: the next page starts after the last key
    // the index gave, and in the order by modification a row changed in between (now
    // past the bound) is left for the next sync rather than served past `syncedThrough`.
    Ok(match page.order() {
        ListOrder::Natural => {
            let ids = natural_ids(conn, customer, filter, page, natural_after, now);
            let total = count_findings(conn, customer, filter, None, now);
            let through = synced_through(store, conn, customer);
            futures_util::future::try_join3(ids, total, through)
                .await
                .map_err(db_error)?
        }
        ListOrder::Modified { through } => {
            let through = match through {
                Some(through) => Some(through),
                None => synced_through(store, conn, customer)
                    .await
                    .map_err(db_error)?,
            };
            match through {
                // No pass has committed: nothing to sync yet.
                None => (Vec::new(), 0, None),
                Some(bound) => {
                    let ids =
                        modified_ids(conn, customer, filter, page, bound, modified_after, now);
                    let total = count_findings(conn, customer, filter, Some(bound), now);
                    let (ids, total) = futures_util::future::try_join(ids, total)
                        .await
                        .map_err(db_error)?;
                    (ids, total, through)
                }
            }
        }
    })
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
        let conn = &*conn;
        let now = self.clock.now();
        let (ids, total, through) = page_keys(self, conn, customer, filter, &page, now).await?;
        // The page and its next key, from the keys the index gave.
        let keyed = page.page_of(ids, total, sort_key);
        let ids: Vec<String> = keyed.items.into_iter().map(|(id, _)| id).collect();
        // Two fixed statements, each rendered once (`rendered.rs`), rather than one boxed.
        let bound = through.filter(|_| matches!(page.order(), ListOrder::Modified { .. }));
        let by_id = findings_with_identity!(customer).filter(eq_any(findings::id, &ids));
        // The rows become findings as they arrive (`findings_in_order_from`).
        let reads = match (ids.is_empty(), bound) {
            (true, _) => Vec::new(),
            (false, None) => {
                let rows = by_id.rendered_once().load_stream(&mut &*conn).await;
                findings_in_order_from(&ids, rows.map_err(db_error)?, now).await?
            }
            (false, Some(bound)) => {
                let by_id = by_id.filter(findings::modified_at.le(bound));
                let rows = by_id.rendered_once().load_stream(&mut &*conn).await;
                findings_in_order_from(&ids, rows.map_err(db_error)?, now).await?
            }
        };
        let items = with_comments(&mut &*conn, customer, reads)
            .await
            .map_err(db_error)?;
        Ok(Page {
            items,
            total,
            next: keyed.next,
            synced_through: through,
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
            .filter(eq_any(findings::id, &wanted))
            .rendered_once()
            .load_stream::<FindingWithIdentity>(&mut conn)
            .await
            .map_err(db_error)?;
        let reads = findings_in_order_from(&wanted, rows, self.clock.now()).await?;
        with_comments(&mut conn, customer, reads)
            .await
            .map_err(db_error)
    }

    async fn export_findings(
        &self,
        scope: CustomerScope,
        filter: &FindingFilter,
    ) -> Result<Box<dyn posture_domain::ports::FindingBatches>> {
        Ok(Box::new(self.open_export(scope, filter).await?))
    }

    async fn triage_finding(
        &self,
        scope: CustomerScope,
        id: &FindingId,
        change: &TriageChange,
        by: KeyId,
        expected: Option<&[String]>,
    ) -> Result<Finding> {
        self.write_triage(scope, id, change, by, expected).await
    }

    async fn triage_findings(
        &self,
        scope: CustomerScope,
        items: &[(FindingId, Option<Vec<String>>)],
        change: &TriageChange,
        by: KeyId,
    ) -> Result<posture_domain::triage_bulk::BulkTriage> {
        self.write_bulk_triage(scope, items, change, by).await
    }

    async fn expire_triage(&self, batch: u32) -> Result<u64> {
        self.sweep_expired_triage(batch).await
    }

    async fn triage_history(
        &self,
        scope: CustomerScope,
        id: &FindingId,
        page: PageRequest,
    ) -> Result<Page<TriageRecord>> {
        self.read_triage_history(scope, id, page).await
    }

    async fn get_finding(&self, scope: CustomerScope, id: &FindingId) -> Result<Finding> {
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        let row = findings_joined!()
            .filter(findings::customer_id.eq(customer))
            .filter(findings::id.eq(id.as_str()))
            .select((
                FindingRow::as_select(),
                Option::<IdentitySummaryRow>::as_select(),
            ))
            .rendered_once()
            .get_result::<FindingWithIdentity>(&mut conn)
            .await
            .optional()
            .map_err(db_error)?
            .ok_or(Error::NotFound)?;
        let read = vec![read_finding(row, self.clock.now())?];
        let found = with_comments(&mut conn, customer, read).await;
        found.map_err(db_error)?.pop().ok_or(Error::NotFound)
    }
}
