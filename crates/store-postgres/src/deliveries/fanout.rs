//! What an analyzer pass announces, in its own transaction: first its events (the events
//! feed: every new finding, and every known finding resolved, reopened or changed in
//! severity), then the deliveries announcing them — one per active subscription, event type
//! and chunk of [`CHUNK_SIZE`] events, each naming the ids of the events it carries.

use chrono::{DateTime, Utc};
use diesel::{
    prelude::*,
    sql_types::{BigInt, Timestamptz, Uuid as SqlUuid},
};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::{PassId, delivery::CHUNK_SIZE};
use uuid::Uuid;

/// Notes, for the rest of the pass, how known findings change (in `pass_finding_changes`,
/// dropped when the pass's transaction ends): the lifecycle events come from it.
pub(crate) async fn track_changes(conn: &mut AsyncPgConnection) -> QueryResult<()> {
    diesel::sql_query(
        "CREATE TEMP TABLE IF NOT EXISTS pass_finding_changes ( \
             id text NOT NULL, field text NOT NULL, from_value text NOT NULL, \
             to_value text NOT NULL, PRIMARY KEY (id, field)) ON COMMIT DROP",
    )
    .execute(conn)
    .await
    .map(drop)
}

/// Records the pass's events, numbered after the customer's last (the pass holds the
/// customer's lock, so numbers follow commit order; ids sort as the numbers do): its new findings (`finding_<severity>`)
/// and its finding changes (`finding_resolved`: status became resolved; `finding_reopened`:
/// became open again; `finding_severity_changed`), by type and then finding id. Returns how
/// many.
pub(crate) async fn record_events(
    conn: &mut AsyncPgConnection,
    (customer, pass, at): (Uuid, PassId, DateTime<Utc>),
    last: i64,
) -> QueryResult<usize> {
    diesel::sql_query(
        "WITH happened AS ( \
                  SELECT 'finding_' || severity AS event_type, id, NULL::jsonb AS change \
                  FROM findings WHERE customer_id = $1 AND first_pass_id = $2 \
                  UNION ALL \
                  SELECT CASE WHEN field = 'status' AND to_value = 'resolved' \
                                   THEN 'finding_resolved' \
                              WHEN field = 'status' AND to_value = 'open' \
                                   THEN 'finding_reopened' \
                              WHEN field = 'severity' THEN 'finding_severity_changed' END, \
                         id, jsonb_build_object('field', field, 'from', from_value, \
                                                'to', to_value) \
                  FROM pass_finding_changes WHERE from_value <> to_value) \
         INSERT INTO finding_events (customer_id, id, seq, event_type, pass_id, finding_id, \
                                     change, created_at) \
         SELECT $1, posture_event_id($3, n.seq), n.seq, n.event_type, $2, n.id, n.change, $3 \
         FROM (SELECT $4 + row_number() OVER (ORDER BY h.event_type, h.id) AS seq, \
                      h.event_type, h.id, h.change \
               FROM happened h WHERE h.event_type IS NOT NULL) n",
    )
    .bind::<SqlUuid, _>(customer)
    .bind::<SqlUuid, _>(pass.as_uuid())
    .bind::<Timestamptz, _>(at)
    .bind::<BigInt, _>(last)
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
        crate::notify_workers(conn).await?;
    }
    Ok(queued)
}
