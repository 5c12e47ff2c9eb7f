//! The events feed: a customer's finding events in the order their passes committed
//! (`seq`), each with its finding as the API shows it now. Every statement filters by the
//! customer of its scope.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::{
    prelude::*,
    sql_types::{BigInt, Timestamptz},
};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    CustomerScope, Error, EventId, PassId, Result,
    event::{EventFilter, EventPage, FindingEvent},
    finding::Finding,
    ports::EventRepository,
};
use uuid::Uuid;

use crate::{
    PgStore,
    error::{corrupt, db_error},
    findings::{FindingRow, FindingWithIdentity, findings_with_identity, to_finding},
    identities::IdentitySummaryRow,
    schema::{finding_events, findings, identities},
};

#[derive(Queryable, Selectable)]
#[diesel(table_name = finding_events, check_for_backend(diesel::pg::Pg))]
struct EventRow {
    id: Uuid,
    event_type: String,
    pass_id: Uuid,
    finding_id: String,
    change: Option<serde_json::Value>,
    created_at: DateTime<Utc>,
}

fn to_event(row: EventRow, finding: Finding) -> Result<FindingEvent> {
    Ok(FindingEvent {
        id: EventId::from_uuid(row.id),
        event_type: row
            .event_type
            .parse()
            .map_err(|e| corrupt("event type", e))?,
        created_at: row.created_at,
        pass_id: PassId::from_uuid(row.pass_id),
        finding,
        change: row
            .change
            .map(|c| serde_json::from_value(c).map_err(|e| corrupt("event change", e)))
            .transpose()?,
    })
}

/// The events of `rows` with their findings (read in one statement). An event whose finding
/// is gone is a broken invariant (findings are never deleted).
async fn with_findings(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    rows: Vec<EventRow>,
) -> Result<Vec<FindingEvent>> {
    let wanted: Vec<&str> = rows.iter().map(|r| r.finding_id.as_str()).collect();
    let found: Vec<FindingWithIdentity> = findings_with_identity!(customer)
        .filter(findings::id.eq_any(&wanted))
        .load(conn)
        .await
        .map_err(db_error)?;
    let mut by_id: HashMap<String, Finding> = HashMap::with_capacity(found.len());
    for row in found {
        let finding = to_finding(row)?;
        by_id.insert(finding.id.as_str().to_owned(), finding);
    }
    rows.into_iter()
        .map(|row| {
            let finding = by_id
                .get(&row.finding_id)
                .cloned()
                .ok_or_else(|| corrupt("event", format!("finding {} is gone", row.finding_id)))?;
            to_event(row, finding)
        })
        .collect()
}

/// The number of the event `id` of the customer; `NotFound` when it has none.
async fn seq_of(conn: &mut AsyncPgConnection, customer: Uuid, id: EventId) -> Result<i64> {
    finding_events::table
        .find((customer, id.as_uuid()))
        .select(finding_events::seq)
        .first(conn)
        .await
        .optional()
        .map_err(db_error)?
        .ok_or(Error::NotFound)
}

/// The number before the customer's first event created at or after `since` (events are
/// numbered in the order of their passes, whose times only grow).
async fn seq_before(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    since: DateTime<Utc>,
) -> Result<i64> {
    let first: Option<i64> = finding_events::table
        .filter(finding_events::customer_id.eq(customer))
        .filter(finding_events::created_at.ge(since))
        .select(diesel::dsl::min(finding_events::seq))
        .first(conn)
        .await
        .map_err(db_error)?;
    Ok(first.map_or(i64::MAX, |seq| seq - 1))
}

#[async_trait]
impl EventRepository for PgStore {
    async fn list_events(&self, scope: CustomerScope, filter: &EventFilter) -> Result<EventPage> {
        filter.validate()?;
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        let mut after = match filter.after {
            Some(id) => seq_of(&mut conn, customer, id).await?,
            None => 0,
        };
        if let Some(since) = filter.created_since {
            after = after.max(seq_before(&mut conn, customer, since).await?);
        }
        let mut query = finding_events::table
            .filter(finding_events::customer_id.eq(customer))
            .filter(finding_events::seq.gt(after))
            .order(finding_events::seq)
            .limit(i64::from(filter.limit) + 1)
            .select(EventRow::as_select())
            .into_boxed();
        if !filter.types.is_empty() {
            let types: Vec<&str> = filter.types.iter().map(|t| t.as_str()).collect();
            query = query.filter(finding_events::event_type.eq_any(types));
        }
        if let Some(since) = filter.created_since {
            query = query.filter(finding_events::created_at.ge(since));
        }
        let mut rows: Vec<EventRow> = query.load(&mut conn).await.map_err(db_error)?;
        let has_more = rows.len() > filter.limit as usize;
        rows.truncate(filter.limit as usize);
        Ok(EventPage {
            events: with_findings(&mut conn, customer, rows).await?,
            has_more,
        })
    }

    async fn get_event(&self, scope: CustomerScope, id: EventId) -> Result<FindingEvent> {
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        let row: EventRow = finding_events::table
            .find((customer, id.as_uuid()))
            .select(EventRow::as_select())
            .first(&mut conn)
            .await
            .optional()
            .map_err(db_error)?
            .ok_or(Error::NotFound)?;
        with_findings(&mut conn, customer, vec![row])
            .await?
            .pop()
            .ok_or(Error::NotFound)
    }

    async fn purge_events(&self, cutoff: DateTime<Utc>, batch: u32) -> Result<u64> {
        let mut conn = self.conn().await?;
        let deleted = diesel::sql_query(
            "DELETE FROM finding_events e USING ( \
                 SELECT customer_id, id FROM finding_events WHERE created_at < $1 \
                 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED) old \
             WHERE e.customer_id = old.customer_id AND e.id = old.id",
        )
        .bind::<Timestamptz, _>(cutoff)
        .bind::<BigInt, _>(i64::from(batch))
        .execute(&mut conn)
        .await
        .map_err(db_error)?;
        Ok(deleted as u64)
    }
}
