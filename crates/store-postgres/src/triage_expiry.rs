//! The worker's triage sweep: a mark past its `expiresAt` already reads as `untriaged`
//! (reads judge it on the store's clock); the sweep records it so, customer by customer,
//! as a triage write does: the finding's columns, a history record without a key, a
//! `finding_triage_expired` event (and its deliveries), a modification the sync carries.

use chrono::{DateTime, Utc};
use diesel::{prelude::*, sql_types::Timestamptz};
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
use posture_domain::{Result, event::NewEvent, triage::TriageState, webhook::EventType};
use uuid::Uuid;

use crate::{
    PgStore,
    error::db_error,
    schema::{finding_triage_history, findings},
    spanning::{Spanning, across_customers},
    text::Parsed,
    triage::{announce, lock_customer},
};

/// A mark past its expiry: the finding's id, its state and reason, and when it expired.
type Mark = (String, Parsed<TriageState>, Option<String>, DateTime<Utc>);

#[derive(QueryableByName)]
struct CustomerRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    customer_id: Uuid,
}

impl PgStore {
    /// Records as `untriaged` at most `batch` marks whose expiry is at or before the
    /// store's clock; how many.
    pub(crate) async fn sweep_expired_triage(&self, batch: u32) -> Result<u64> {
        let now = self.clock.now();
        let mut conn = self.conn().await?;
        let customers: Vec<CustomerRow> =
            across_customers(&mut conn, Spanning::TriageExpiry, |conn| {
                Box::pin(
                    diesel::sql_query(
                        "SELECT DISTINCT customer_id FROM findings \
                         WHERE triage_expires_at <= $1",
                    )
                    .bind::<Timestamptz, _>(now)
                    .load(conn),
                )
            })
            .await
            .map_err(db_error)?;
        let mut expired = 0_u64;
        let mut busy = 0_u32;
        for CustomerRow { customer_id } in customers {
            let left = u64::from(batch).saturating_sub(expired);
            if left == 0 {
                break;
            }
            match conn
                .transaction(async |conn| expire_marks(conn, customer_id, now, left).await)
                .await
            {
                Ok(done) => expired += done,
                // A pass holds this customer's lock past the wait: the others are swept,
                // this one at the next round. Anything else (the store gone, a statement
                // out of time) ends the round, and the worker says so.
                Err(e) if waited_past_the_lock(&e) => {
                    tracing::debug!(customer.id = %customer_id, "expired triage marks wait for a pass");
                    busy += 1;
                }
                Err(e) => return Err(db_error(e)),
            }
        }
        if busy > 0 {
            tracing::info!(
                customers = busy,
                "expired triage marks of customers busy with a pass wait for the next sweep"
            );
        }
        Ok(expired)
    }
}

/// Whether `e` is the customer's lock not granted within the wait (`lock_timeout`).
fn waited_past_the_lock(e: &diesel::result::Error) -> bool {
    matches!(e, diesel::result::Error::DatabaseError(_, info)
        if info.message().contains("lock timeout"))
}

/// Records at most `limit` of the customer's marks expired at `now` as `untriaged`, in the
/// caller's transaction; how many.
async fn expire_marks(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    now: DateTime<Utc>,
    limit: u64,
) -> QueryResult<u64> {
    let modified_at = lock_customer(conn, customer).await?;
    let marks: Vec<Mark> = findings::table
        .filter(findings::customer_id.eq(customer))
        .filter(findings::triage_expires_at.le(now))
        .order(findings::id)
        .limit(i64::try_from(limit).unwrap_or(i64::MAX))
        .select((
            findings::id,
            findings::triage_state,
            findings::triage_reason,
            findings::triage_expires_at.assume_not_null(),
        ))
        .for_update()
        .load(conn)
        .await?;
    if marks.is_empty() {
        return Ok(0);
    }
    let ids: Vec<&str> = marks.iter().map(|(id, ..)| id.as_str()).collect();
    diesel::update(
        findings::table
            .filter(findings::customer_id.eq(customer))
            .filter(findings::id.eq_any(&ids)),
    )
    .set((
        findings::triage_state.eq(TriageState::Untriaged.as_str()),
        findings::triage_reason.eq(None::<&str>),
        findings::triage_comment.eq(None::<&str>),
        findings::triage_change_id.eq(None::<Uuid>),
        findings::triage_expires_at.eq(None::<DateTime<Utc>>),
        // As reads have shown it since the expiry: updated then, by no key.
        findings::triage_updated_at.eq(findings::triage_expires_at),
        findings::triage_key_id.eq(None::<Uuid>),
        findings::triage_key_name.eq(None::<&str>),
        findings::modified_at.eq(modified_at),
    ))
    .execute(conn)
    .await?;
    let records: Vec<_> = marks
        .iter()
        .map(|(id, state, reason, expired_at)| {
            (
                finding_triage_history::customer_id.eq(customer),
                finding_triage_history::finding_id.eq(id.as_str()),
                finding_triage_history::id.eq(Uuid::now_v7()),
                finding_triage_history::created_at.eq(*expired_at),
                finding_triage_history::from_state.eq(state.0.as_str()),
                finding_triage_history::from_reason.eq(reason.as_deref()),
                finding_triage_history::to_state.eq(TriageState::Untriaged.as_str()),
            )
        })
        .collect();
    diesel::insert_into(finding_triage_history::table)
        .values(records)
        .execute(conn)
        .await?;
    crate::triage_history::prune(conn, customer, &ids).await?;
    let events: Vec<_> = marks
        .iter()
        .map(|(id, state, ..)| {
            NewEvent::triage(
                EventType::FindingTriageExpired,
                id,
                state.0,
                TriageState::Untriaged,
            )
        })
        .collect();
    announce(conn, (customer, Uuid::now_v7(), modified_at), &events).await?;
    Ok(marks.len() as u64)
}
