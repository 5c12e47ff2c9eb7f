//! What an analyzer pass announces, in its own transaction: first its events (the events
//! feed: every new finding, and every known finding resolved, reopened or changed in
//! severity), then the deliveries announcing them — one per active subscription, event type
//! and chunk of [`CHUNK_SIZE`] events, each naming the ids of the events it carries.

use chrono::{DateTime, Utc};
use diesel::{
    prelude::*,
    sql_types::{Array, BigInt, Text, Timestamptz, Uuid as SqlUuid},
};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::{PassId, delivery::CHUNK_SIZE, event::NewEvent};
use uuid::Uuid;

/// Records the pass's events, numbered after the customer's last (the pass holds the
/// customer's lock, so numbers follow commit order; ids sort as the numbers do): its new
/// findings (`finding_<severity>`), then its lifecycle events (`lifecycle`, in their
/// order: [`NewEvent::numbering_order`]), each by type and then finding id (every new
/// finding's type sorts before every lifecycle type). Returns how many.
///
/// Two statements, each naming only the customer's rows: on Citus each runs on the
/// customer's node (the first reads and writes there; the second sends the few changes).
pub(crate) async fn record_events(
    conn: &mut AsyncPgConnection,
    (customer, pass, at): (Uuid, PassId, DateTime<Utc>),
    last: i64,
    lifecycle: &[NewEvent],
) -> QueryResult<usize> {
    let new = diesel::sql_query(
        "INSERT INTO finding_events (customer_id, id, seq, event_type, pass_id, finding_id, \
                                     change, created_at) \
         SELECT n.customer_id, posture_event_id($3, $4 + n.rank), $4 + n.rank, n.event_type, \
                $2, n.id, NULL, $3 \
         FROM (SELECT customer_id, 'finding_' || severity AS event_type, id, \
                      row_number() OVER (PARTITION BY customer_id \
                                         ORDER BY 'finding_' || severity, id) AS rank \
               FROM findings WHERE customer_id = $1 AND first_pass_id = $2) n",
    )
    .bind::<SqlUuid, _>(customer)
    .bind::<SqlUuid, _>(pass.as_uuid())
    .bind::<Timestamptz, _>(at)
    .bind::<BigInt, _>(last)
    .execute(&mut *conn)
    .await?;
    let changed = record_changes(conn, (customer, pass, at), last + new as i64, lifecycle).await?;
    Ok(new + changed)
}

/// Records `changes` (in their order) as events of
/// `pass`, numbered after `last`: a pass's lifecycle events, or the triage events of a
/// triage write or expiry sweep (whose own id stands for the pass). Returns how many.
pub(crate) async fn record_changes(
    conn: &mut AsyncPgConnection,
    (customer, pass, at): (Uuid, PassId, DateTime<Utc>),
    last: i64,
    changes: &[NewEvent],
) -> QueryResult<usize> {
    if changes.is_empty() {
        return Ok(0);
    }
    diesel::sql_query(
        "INSERT INTO finding_events (customer_id, id, seq, event_type, pass_id, finding_id, \
                                     change, created_at) \
         SELECT $1, posture_event_id($3, $4 + c.n), $4 + c.n, c.event_type, $2, c.id, \
                c.change::jsonb, $3 \
         FROM unnest($5::text[], $6::text[], $7::text[]) WITH ORDINALITY \
              AS c(event_type, id, change, n)",
    )
    .bind::<SqlUuid, _>(customer)
    .bind::<SqlUuid, _>(pass.as_uuid())
    .bind::<Timestamptz, _>(at)
    .bind::<BigInt, _>(last)
    .bind::<Array<Text>, _>(
        changes
            .iter()
            .map(|e| e.event_type.as_str())
            .collect::<Vec<_>>(),
    )
    .bind::<Array<Text>, _>(
        changes
            .iter()
            .map(|e| e.finding_id.as_str())
            .collect::<Vec<_>>(),
    )
    .bind::<Array<Text>, _>(
        changes
            .iter()
            .map(NewEvent::change_json)
            .collect::<Vec<_>>(),
    )
    .execute(conn)
    .await
}

/// The number of the customer's last event (0 before the first): a pass's events are
/// numbered after it.
pub(crate) async fn last_event(conn: &mut AsyncPgConnection, customer: Uuid) -> QueryResult<i64> {
    use crate::schema::finding_events;
    // The greatest id is the last event (ids sort as events are numbered).
    finding_events::table
        .filter(finding_events::customer_id.eq(customer))
        .order(finding_events::id.desc())
        .select(finding_events::seq)
        .first::<i64>(conn)
        .await
        .optional()
        .map(|last| last.unwrap_or(0))
}

/// Queues one delivery per chunk of the pass's events (those numbered after `after`;
/// [`CHUNK_SIZE`] of one type, by finding id) and active subscription listening to its type, created `at` the pass's time
/// (the `modifiedAt` of what they carry). Idempotent. Returns how many were queued.
///
/// The subscriptions are read `FOR SHARE` until the pass commits: a deactivation that
/// started first is waited for (and its subscription then skipped), one that starts later
/// waits for the pass and then cancels the deliveries it queued. Either way no delivery is
/// left pending for an inactive subscription.
pub(crate) async fn fan_out(
    conn: &mut AsyncPgConnection,
    (customer, pass, at): (Uuid, PassId, DateTime<Utc>),
    after: i64,
) -> QueryResult<usize> {
    let queued = diesel::sql_query(
        "WITH numbered AS ( \
             SELECT event_type, finding_id, change, id, \
                    (row_number() OVER (PARTITION BY event_type ORDER BY finding_id) - 1) / $4 \
                        AS chunk \
             FROM finding_events \
             WHERE customer_id = $1 AND id >= posture_event_floor($3) AND seq > $5), \
         chunks AS ( \
             SELECT event_type, chunk::int AS chunk, \
                    array_agg(finding_id ORDER BY finding_id) AS ids, \
                    CASE WHEN bool_and(change IS NULL) THEN NULL \
                         ELSE jsonb_agg(change ORDER BY finding_id) END AS changes, \
                    array_agg(id ORDER BY finding_id) AS event_ids \
             FROM numbered GROUP BY event_type, chunk) \
         INSERT INTO webhook_deliveries (customer_id, id, subscription_id, pass_id, event_type, \
                                         chunk, finding_ids, changes, event_ids, \
                                         next_attempt_at, created_at) \
         SELECT $1, posture_uuid_v7(), s.id, $2, c.event_type, c.chunk, c.ids, c.changes, \
                c.event_ids, now(), $3 \
         FROM chunks c JOIN webhook_subscriptions s \
           ON s.customer_id = $1 AND s.active AND s.disabled_at IS NULL \
              AND c.event_type = ANY(s.event_types) \
         FOR SHARE OF s \
         ON CONFLICT ON CONSTRAINT webhook_deliveries_fanout_key DO NOTHING",
    )
    .bind::<SqlUuid, _>(customer)
    .bind::<SqlUuid, _>(pass.as_uuid())
    .bind::<Timestamptz, _>(at)
    .bind::<BigInt, _>(i64::try_from(CHUNK_SIZE).unwrap_or(i64::MAX))
    .bind::<BigInt, _>(after)
    .execute(&mut *conn)
    .await?;
    if queued > 0 {
        // Delivered to listening workers when the pass commits.
        crate::wake::notify_workers(conn).await?;
    }
    Ok(queued)
}
