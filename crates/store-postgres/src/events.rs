//! The events feed: a customer's finding events in the order their passes committed
//! (`seq`), each with its finding as the API shows it now. Every statement filters by the
//! customer of its scope.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::{prelude::*, sql_types::Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    CustomerScope, Error, EventId, PassId, Result,
    event::{EventFilter, EventPage, FindingEvent},
    finding::Finding,
    ports::EventRepository,
    webhook::EventType,
};
use uuid::Uuid;

use crate::{
    PgStore,
    error::{corrupt, db_error},
    findings::{
        FindingRow, FindingWithIdentity, findings_with_identity, read_finding, with_comments,
    },
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
    now: DateTime<Utc>,
) -> Result<Vec<FindingEvent>> {
    let mut wanted: Vec<&str> = rows.iter().map(|r| r.finding_id.as_str()).collect();
    wanted.sort_unstable();
    wanted.dedup();
    // `IN (SELECT unnest(...))`, not `= ANY(...)`: once PostgreSQL caches the statement's
    // generic plan, `= ANY` of a parameter is a linear search of the array for every row it
    // filters (a page of 500 events over a customer of 1,000 findings took 4.6 ms in its
    // seq scan, a third of the feed's throughput), where the semi-join probes the key.
    let found: Vec<FindingWithIdentity> = findings_with_identity!(customer)
        .filter(
            diesel::dsl::sql::<diesel::sql_types::Bool>("findings.id IN (SELECT unnest(")
                .bind::<diesel::sql_types::Array<diesel::sql_types::Text>, _>(wanted)
                .sql("::text[]))"),
        )
        .load(conn)
        .await
        .map_err(db_error)?;
    let reads = found
        .into_iter()
        .map(|row| read_finding(row, now))
        .collect::<Result<Vec<_>>>()?;
    let mut by_id: HashMap<String, Finding> = HashMap::with_capacity(reads.len());
    for finding in with_comments(conn, customer, reads)
        .await
        .map_err(db_error)?
    {
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

diesel::define_sql_function! {
    /// The least event id of the millisecond of `at` (migration 000016): every event created
    /// at or after `at` has an id at least this one.
    fn posture_event_floor(at: Timestamptz) -> diesel::sql_types::Uuid;
}

/// Whether the customer has the event `id`; `NotFound` when not.
async fn must_exist(conn: &mut AsyncPgConnection, customer: Uuid, id: EventId) -> Result<()> {
    finding_events::table
        .find((customer, id.as_uuid()))
        .select(finding_events::seq)
        .first::<i64>(conn)
        .await
        .optional()
        .map_err(db_error)?
        .map(drop)
        .ok_or(Error::NotFound)
}

#[async_trait]
impl EventRepository for PgStore {
    async fn list_events(&self, scope: CustomerScope, filter: &EventFilter) -> Result<EventPage> {
        filter.validate()?;
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        // The primary key's order is the feed's: a customer's event ids sort as its events
        // are numbered (each begins with its pass's time, and passes take ever later times).
        let mut query = finding_events::table
            .filter(finding_events::customer_id.eq(customer))
            .order(finding_events::id)
            .limit(i64::from(filter.limit) + 1)
            .select(EventRow::as_select())
            .into_boxed();
        if let Some(after) = filter.after {
            must_exist(&mut conn, customer, after).await?;
            query = query.filter(finding_events::id.gt(after.as_uuid()));
        }
        // Without a filter, the types this build knows: an event of a type a newer ingest
        // wrote during a rolling upgrade is served once this instance knows it, instead
        // of failing the page.
        let types = if filter.types.is_empty() {
            EventType::ALL
        } else {
            filter.types.as_slice()
        };
        let types: Vec<&str> = types.iter().map(|t| t.as_str()).collect();
        query = query.filter(finding_events::event_type.eq_any(types));
        if let Some(since) = filter.created_since {
            query = query
                .filter(finding_events::id.ge(posture_event_floor(since)))
                .filter(finding_events::created_at.ge(since));
        }
        let mut rows: Vec<EventRow> = query.load(&mut conn).await.map_err(db_error)?;
        let has_more = rows.len() > filter.limit as usize;
        rows.truncate(filter.limit as usize);
        Ok(EventPage {
            events: with_findings(&mut conn, customer, rows, self.clock.now()).await?,
            has_more,
        })
    }

    async fn get_event(&self, scope: CustomerScope, id: EventId) -> Result<FindingEvent> {
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        let known: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
        let row: EventRow = finding_events::table
            .find((customer, id.as_uuid()))
            .filter(finding_events::event_type.eq_any(known))
            .select(EventRow::as_select())
            .first(&mut conn)
            .await
            .optional()
            .map_err(db_error)?
            .ok_or(Error::NotFound)?;
        with_findings(&mut conn, customer, vec![row], self.clock.now())
            .await?
            .pop()
            .ok_or(Error::NotFound)
    }

    async fn purge_events(&self, cutoff: DateTime<Utc>, batch: u32) -> Result<u64> {
        self.sweep_events(cutoff, batch).await
    }
}
