//! Triage: a finding's mark written by a customer's key, and its history. Every statement
//! filters by the customer of its scope.
//!
//! A triage is a change the sync contract must carry (`modifiedSince`, the CLI's copy): it
//! moves the finding's `modified_at` and the customer's `synced_through` together, under
//! the customer's row of `customer_sync`, the lock an analyzer pass holds while it writes.
//! So a triage waits for a running pass (at most [`PASS_WAIT`], then 503 with
//! `Retry-After`), and takes a time later than every committed change: a consumer that
//! synced through it can never miss a row committed after.

use chrono::{DateTime, Utc};
use diesel::{prelude::*, sql_types::Timestamptz};
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    CustomerScope, Error, FindingId, KeyId, Page, PageRequest, PassId, Result,
    event::NewEvent,
    finding::Finding,
    triage::{TriageActor, TriageChange, TriageReason, TriageRecord, TriageState},
    webhook::EventType,
};
use uuid::Uuid;

use crate::{
    PgStore,
    error::db_error,
    findings::{
        FindingRow, FindingWithIdentity, findings_with_identity, read_finding, with_comments,
    },
    identities::IdentitySummaryRow,
    schema::{
        api_keys, customer_sync, finding_triage_history, findings, identities, triage_changes,
    },
    sync::{after_key, read_text_key, text_key},
    text::Parsed,
    triage_comments::{Comment, OfRecord},
};

/// How long a triage waits for the customer's running pass before answering 503.
pub const PASS_WAIT: &str = "5s";

#[derive(QueryableByName)]
struct Clock {
    #[diesel(sql_type = Timestamptz)]
    modified_at: DateTime<Utc>,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = finding_triage_history, check_for_backend(diesel::pg::Pg))]
struct HistoryRow {
    id: Uuid,
    created_at: DateTime<Utc>,
    key_id: Option<Uuid>,
    key_name: Option<String>,
    from_state: Parsed<TriageState>,
    from_reason: Option<Parsed<TriageReason>>,
    to_state: Parsed<TriageState>,
    to_reason: Option<Parsed<TriageReason>>,
    #[diesel(
        select_expression = Comment::<OfRecord>::new(),
        select_expression_type = Comment<OfRecord>
    )]
    comment: Option<String>,
    expires_at: Option<DateTime<Utc>>,
}

impl From<HistoryRow> for TriageRecord {
    fn from(row: HistoryRow) -> Self {
        TriageRecord {
            id: row.id,
            at: row.created_at,
            by: row.key_id.map(|id| TriageActor {
                key_id: KeyId::from_uuid(id),
                key_name: row.key_name.unwrap_or_default(),
            }),
            from: row.from_state.0,
            from_reason: row.from_reason.map(|r| r.0),
            to: row.to_state.0,
            to_reason: row.to_reason.map(|r| r.0),
            comment: row.comment,
            expires_at: row.expires_at,
        }
    }
}

/// Locks the customer's findings `ids` in id order (two writers never wait on each other in
/// turn) and reads them: the rows found, in id order.
async fn locked_findings(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    ids: &[&str],
) -> QueryResult<Vec<FindingWithIdentity>> {
    let locked: Vec<String> = findings::table
        .filter(findings::customer_id.eq(customer))
        .filter(findings::id.eq_any(ids))
        .order(findings::id)
        .select(findings::id)
        .for_update()
        .load(conn)
        .await?;
    if locked.is_empty() {
        return Ok(Vec::new());
    }
    findings_with_identity!(customer)
        .filter(findings::id.eq_any(&locked))
        .order(findings::id)
        .load(conn)
        .await
}

/// `If-Match` did not hold.
pub(crate) fn stale() -> Error {
    Error::PreconditionFailed(
        "the finding changed since the ETag given in If-Match was read; read it again".into(),
    )
}

/// Records the triage `events` of the change `id` (a write, or an expiry sweep of one
/// customer: its id stands for the pass of the events' `analyzerPassId`), queues their
/// deliveries, and marks the customer's data changed: `synced_through` moves to
/// `modified_at` (taken by [`lock_customer`] in this transaction), the data version and
/// its notification.
pub(crate) async fn announce(
    conn: &mut AsyncPgConnection,
    (customer, id, modified_at): (Uuid, Uuid, DateTime<Utc>),
    events: &[NewEvent],
) -> QueryResult<()> {
    let pass = (customer, PassId::from_uuid(id), modified_at);
    let last = crate::deliveries::last_event(conn, customer).await?;
    if crate::deliveries::record_changes(conn, pass, last, events).await? > 0 {
        crate::deliveries::fan_out(conn, pass, last).await?;
    }
    diesel::update(customer_sync::table.find(customer))
        .set(customer_sync::synced_through.eq(modified_at))
        .execute(&mut *conn)
        .await?;
    diesel::sql_query("SELECT bump_data_version($1)")
        .bind::<diesel::sql_types::Uuid, _>(customer)
        .execute(&mut *conn)
        .await?;
    crate::data_versions::notify_data_changed(conn, &[customer]).await
}

/// The customer's sync lock and a modification time later than every committed change.
pub(crate) async fn lock_customer(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
) -> QueryResult<DateTime<Utc>> {
    // On Citus the wait is on the customer's node: the coordinator sends it `SET LOCAL`s
    // only when told to (elsewhere this names a setting nothing reads).
    diesel::sql_query("SET LOCAL citus.propagate_set_commands = 'local'")
        .execute(conn)
        .await?;
    diesel::sql_query(format!("SET LOCAL lock_timeout = '{PASS_WAIT}'"))
        .execute(conn)
        .await?;
    diesel::insert_into(customer_sync::table)
        .values(customer_sync::customer_id.eq(customer))
        .on_conflict_do_nothing()
        .execute(conn)
        .await?;
    let clock: Clock = diesel::sql_query(
        "SELECT greatest(clock_timestamp(), \
                         coalesce(synced_through + interval '1 microsecond', '-infinity')) \
                AS modified_at \
         FROM customer_sync WHERE customer_id = $1 FOR UPDATE",
    )
    .bind::<diesel::sql_types::Uuid, _>(customer)
    .get_result(conn)
    .await?;
    diesel::sql_query("SET LOCAL lock_timeout = 0")
        .execute(conn)
        .await?;
    Ok(clock.modified_at)
}

/// Who writes a triage, and when: the key (with its name as it is now), the store's time
/// of the mark, and the modification time [`lock_customer`] took.
pub(crate) struct Writer {
    pub customer: Uuid,
    pub by: KeyId,
    pub key_name: String,
    pub now: DateTime<Utc>,
    pub modified_at: DateTime<Utc>,
}

impl Writer {
    /// The writer of `by` (named `key_name`) at `now`, the customer's lock taken.
    pub(crate) async fn locked(
        conn: &mut AsyncPgConnection,
        customer: Uuid,
        (by, key_name): (KeyId, String),
        now: DateTime<Utc>,
    ) -> QueryResult<Self> {
        let modified_at = lock_customer(conn, customer).await?;
        Ok(Self {
            customer,
            by,
            key_name,
            now,
            modified_at,
        })
    }
}

/// Why a finding was not triaged.
pub(crate) enum Refused {
    NotFound,
    /// `If-Match` did not hold.
    Stale,
}

/// A finding to triage: its id, and the tags `If-Match` accepts (`None`: any).
pub(crate) type Target<'a> = (&'a FindingId, Option<&'a [String]>);

/// Writes `change` (the write `change_id`) to the findings `targets`, in the caller's
/// transaction under the customer's lock, in a few statements whatever their number: the
/// rows locked and read, the change's comment kept once, the written rows updated, their
/// history records inserted, the records past a finding's newest
/// [`crate::triage_history::HISTORY_KEPT`] deleted.
/// Per target, in order: the state before and the history record's id, or why it was not
/// written.
pub(crate) async fn write_many(
    conn: &mut AsyncPgConnection,
    writer: &Writer,
    targets: &[Target<'_>],
    (change_id, change): (Uuid, &TriageChange),
) -> QueryResult<Vec<std::result::Result<(TriageState, Uuid), Refused>>> {
    let customer = writer.customer;
    let ids: Vec<&str> = targets.iter().map(|(id, _)| id.as_str()).collect();
    // A row this build cannot read is no finding to triage.
    let reads = locked_findings(conn, customer, &ids)
        .await?
        .into_iter()
        .filter_map(|row| read_finding(row, writer.now).ok())
        .collect();
    let mut found: std::collections::HashMap<String, Finding> =
        with_comments(conn, customer, reads)
            .await?
            .into_iter()
            .map(|finding| (finding.id.as_str().to_owned(), finding))
            .collect();
    let outcomes: Vec<_> = targets
        .iter()
        .map(|(id, expected)| {
            let before = found.remove(id.as_str()).ok_or(Refused::NotFound)?;
            if let Some(tags) = expected
                && !tags.iter().any(|tag| *tag == before.tag())
            {
                return Err(Refused::Stale);
            }
            Ok((before, Uuid::now_v7()))
        })
        .collect();
    let written: Vec<(&str, &Finding, Uuid)> = targets
        .iter()
        .zip(&outcomes)
        .filter_map(|((id, _), outcome)| {
            let (before, record) = outcome.as_ref().ok()?;
            Some((id.as_str(), before, *record))
        })
        .collect();
    if !written.is_empty() {
        let key_name = Some(writer.key_name.as_str());
        let ids: Vec<&str> = written.iter().map(|(id, ..)| *id).collect();
        // The comment, once for every finding of the write.
        let kept = match &change.comment {
            Some(comment) => {
                diesel::insert_into(triage_changes::table)
                    .values((
                        triage_changes::customer_id.eq(customer),
                        triage_changes::id.eq(change_id),
                        triage_changes::comment.eq(comment),
                        triage_changes::created_at.eq(writer.now),
                    ))
                    .execute(&mut *conn)
                    .await?;
                Some(change_id)
            }
            None => None,
        };
        diesel::update(
            findings::table
                .filter(findings::customer_id.eq(customer))
                .filter(findings::id.eq_any(&ids)),
        )
        .set((
            findings::triage_state.eq(change.state.as_str()),
            findings::triage_reason.eq(change.reason.map(|r| r.as_str())),
            findings::triage_comment.eq(None::<&str>),
            findings::triage_change_id.eq(kept),
            findings::triage_expires_at.eq(change.expires_at),
            findings::triage_updated_at.eq(writer.now),
            findings::triage_key_id.eq(Some(writer.by.as_uuid())),
            findings::triage_key_name.eq(key_name),
            findings::modified_at.eq(writer.modified_at),
        ))
        .execute(&mut *conn)
        .await?;
        let records: Vec<_> = written
            .iter()
            .map(|(id, before, record)| {
                (
                    finding_triage_history::customer_id.eq(customer),
                    finding_triage_history::finding_id.eq(*id),
                    finding_triage_history::id.eq(*record),
                    finding_triage_history::created_at.eq(writer.now),
                    finding_triage_history::key_id.eq(Some(writer.by.as_uuid())),
                    finding_triage_history::key_name.eq(key_name),
                    finding_triage_history::from_state.eq(before.triage.state.as_str()),
                    finding_triage_history::from_reason
                        .eq(before.triage.reason.map(|r| r.as_str())),
                    finding_triage_history::to_state.eq(change.state.as_str()),
                    finding_triage_history::to_reason.eq(change.reason.map(|r| r.as_str())),
                    finding_triage_history::change_id.eq(kept),
                    finding_triage_history::expires_at.eq(change.expires_at),
                )
            })
            .collect();
        diesel::insert_into(finding_triage_history::table)
            .values(&records)
            .execute(&mut *conn)
            .await?;
        crate::triage_history::prune(conn, customer, &ids).await?;
    }
    Ok(outcomes
        .into_iter()
        .map(|outcome| outcome.map(|(before, record)| (before.triage.state, record)))
        .collect())
}

impl PgStore {
    /// The writer of `by`'s triage: its key's name as it is now (a plain table of the
    /// coordinator on Citus: read apart from the customer's transaction).
    pub(crate) async fn key_name(
        &self,
        conn: &mut AsyncPgConnection,
        customer: Uuid,
        by: KeyId,
    ) -> Result<String> {
        Ok(api_keys::table
            .find(by.as_uuid())
            .filter(api_keys::customer_id.eq(customer))
            .select(api_keys::name)
            .first(conn)
            .await
            .optional()
            .map_err(db_error)?
            .unwrap_or_default())
    }

    pub(crate) async fn write_triage(
        &self,
        scope: CustomerScope,
        id: &FindingId,
        change: &TriageChange,
        by: KeyId,
        expected: Option<&[String]>,
    ) -> Result<Finding> {
        let customer = scope.customer_id().as_uuid();
        let now = self.clock.now();
        let mut conn = self.conn().await?;
        let key_name = self.key_name(&mut conn, customer, by).await?;
        let outcome: std::result::Result<Result<Finding>, diesel::result::Error> = conn
            .transaction(async |conn| {
                let writer = Writer::locked(conn, customer, (by, key_name), now).await?;
                let modified_at = writer.modified_at;
                let written =
                    write_many(conn, &writer, &[(id, expected)], (Uuid::now_v7(), change)).await?;
                // The write's history record is the change the event names.
                let (from, record) = match written.into_iter().next() {
                    Some(Ok(written)) => written,
                    Some(Err(Refused::Stale)) => return Ok(Err(stale())),
                    Some(Err(Refused::NotFound)) | None => return Ok(Err(Error::NotFound)),
                };
                let event =
                    NewEvent::triage(EventType::FindingTriaged, id.as_str(), from, change.state);
                announce(conn, (customer, record, modified_at), &[event]).await?;
                let after = findings_with_identity!(customer)
                    .filter(findings::id.eq(id.as_str()))
                    .get_result::<FindingWithIdentity>(conn)
                    .await?;
                let read = match read_finding(after, now) {
                    Ok(read) => read,
                    Err(e) => return Ok(Err(e)),
                };
                let mut after = with_comments(conn, customer, vec![read]).await?;
                Ok(after.pop().ok_or(Error::NotFound))
            })
            .await;
        outcome.map_err(db_error)?
    }

    pub(crate) async fn read_triage_history(
        &self,
        scope: CustomerScope,
        id: &FindingId,
        page: PageRequest,
    ) -> Result<Page<TriageRecord>> {
        let customer = scope.customer_id().as_uuid();
        let after = after_key(&page, read_text_key)?
            .map(|key| {
                key.parse::<Uuid>()
                    .map_err(|_| posture_domain::page::SortKey::mismatch())
            })
            .transpose()?;
        let mut conn = self.conn().await?;
        let exists = findings::table
            .find((customer, id.as_str()))
            .select(findings::id)
            .first::<String>(&mut conn)
            .await
            .optional()
            .map_err(db_error)?;
        if exists.is_none() {
            return Err(Error::NotFound);
        }
        let total: i64 = finding_triage_history::table
            .filter(finding_triage_history::customer_id.eq(customer))
            .filter(finding_triage_history::finding_id.eq(id.as_str()))
            .count()
            .get_result(&mut conn)
            .await
            .map_err(db_error)?;
        // With the change whose comment each record carries (`triage_comments`).
        let mut rows = finding_triage_history::table
            .left_join(
                triage_changes::table.on(triage_changes::customer_id
                    .eq(finding_triage_history::customer_id)
                    .and(
                        triage_changes::id
                            .nullable()
                            .eq(finding_triage_history::change_id),
                    )),
            )
            .filter(finding_triage_history::customer_id.eq(customer))
            .filter(finding_triage_history::finding_id.eq(id.as_str()))
            .into_boxed();
        if let Some(after) = after {
            rows = rows.filter(finding_triage_history::id.lt(after));
        }
        let rows: Vec<HistoryRow> = rows
            .order(finding_triage_history::id.desc())
            .limit(page.fetch())
            .offset(i64::try_from(page.offset()).unwrap_or(i64::MAX))
            .select(HistoryRow::as_select())
            .load(&mut conn)
            .await
            .map_err(db_error)?;
        let records: Vec<TriageRecord> = rows.into_iter().map(TriageRecord::from).collect();
        Ok(page.page_of(records, total.max(0) as u64, |r| text_key(r.id.to_string())))
    }
}
