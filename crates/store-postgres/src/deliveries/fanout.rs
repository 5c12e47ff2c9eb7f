//! Fan-out: the deliveries an analyzer pass queues, in its own transaction — one per
//! active subscription, event type and chunk of [`CHUNK_SIZE`] findings: new findings by
//! severity, and (when a subscription listens to them) the lifecycle events of known
//! findings. Both kinds of chunk are queued by the one statement of [`queue`].

use chrono::{DateTime, Utc};
use diesel::{
    prelude::*,
    sql_types::{BigInt, Timestamptz, Uuid as SqlUuid},
};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::{PassId, delivery::CHUNK_SIZE, webhook::EventType};
use uuid::Uuid;

use crate::schema::webhook_subscriptions;

/// The chunks of a pass's new findings: by severity, [`CHUNK_SIZE`] by id.
const NEW_FINDINGS: &str = "new AS ( \
        SELECT severity, id, (row_number() OVER (PARTITION BY severity ORDER BY id) - 1) / $4 AS chunk \
        FROM findings WHERE customer_id = $1 AND first_pass_id = $2), \
    chunks AS ( \
        SELECT 'finding_' || severity AS event_type, chunk::int AS chunk, \
               array_agg(id ORDER BY id) AS ids, NULL::jsonb AS changes \
        FROM new GROUP BY severity, chunk)";

/// The chunks of a pass's lifecycle events, from its finding changes: `finding_resolved`
/// (status became resolved), `finding_reopened` (became open again),
/// `finding_severity_changed`; [`CHUNK_SIZE`] by finding id, each with its change.
const CHANGES: &str = "changed AS ( \
        SELECT CASE WHEN field = 'status' AND to_value = 'resolved' THEN 'finding_resolved' \
                    WHEN field = 'status' AND to_value = 'open' THEN 'finding_reopened' \
                    WHEN field = 'severity' THEN 'finding_severity_changed' END AS event_type, \
               id, jsonb_build_object('field', field, 'from', from_value, 'to', to_value) AS change \
        FROM pass_finding_changes WHERE from_value <> to_value), \
    numbered AS ( \
        SELECT event_type, id, change, \
               (row_number() OVER (PARTITION BY event_type ORDER BY id) - 1) / $4 AS chunk \
        FROM changed WHERE event_type IS NOT NULL), \
    chunks AS ( \
        SELECT event_type, chunk::int AS chunk, array_agg(id ORDER BY id) AS ids, \
               jsonb_agg(change ORDER BY id) AS changes \
        FROM numbered GROUP BY event_type, chunk)";

/// Queues one delivery per chunk (`chunks`: a CTE giving `chunks(event_type, chunk, ids,
/// changes)`) and active subscription listening to its event type, created `at` the pass's
/// time (the `modifiedAt` of what they carry). Idempotent. Returns how many were queued.
///
/// The subscriptions are read `FOR SHARE` until the pass commits: a deactivation that
/// started first is waited for (and its subscription then skipped), one that starts later
/// waits for the pass and then cancels the deliveries it queued. Either way no delivery is
/// left pending for an inactive subscription.
async fn queue(
    conn: &mut AsyncPgConnection,
    chunks: &str,
    (customer, pass, at): (Uuid, PassId, DateTime<Utc>),
) -> QueryResult<usize> {
    let queued = diesel::sql_query(format!(
        "WITH {chunks} \
         INSERT INTO webhook_deliveries (customer_id, id, subscription_id, pass_id, event_type, \
                                         chunk, finding_ids, changes, next_attempt_at, created_at) \
         SELECT $1, posture_uuid_v7(), s.id, $2, c.event_type, c.chunk, c.ids, c.changes, now(), $3 \
         FROM chunks c JOIN webhook_subscriptions s \
           ON s.customer_id = $1 AND s.active AND s.disabled_at IS NULL \
              AND c.event_type = ANY(s.event_types) \
         FOR SHARE OF s \
         ON CONFLICT ON CONSTRAINT webhook_deliveries_fanout_key DO NOTHING"
    ))
    .bind::<SqlUuid, _>(customer)
    .bind::<SqlUuid, _>(pass.as_uuid())
    .bind::<Timestamptz, _>(at)
    .bind::<BigInt, _>(i64::try_from(CHUNK_SIZE).unwrap_or(i64::MAX))
    .execute(&mut *conn)
    .await?;
    if queued > 0 {
        // Delivered to listening workers when the pass commits.
        crate::notify_workers(conn).await?;
    }
    Ok(queued)
}

/// Queues the deliveries of a pass's new findings (see [`queue`]).
pub(crate) async fn fan_out(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    pass: PassId,
    at: DateTime<Utc>,
) -> QueryResult<usize> {
    queue(conn, NEW_FINDINGS, (customer, pass, at)).await
}

/// Whether a subscription of the customer listens to lifecycle events; if so, creates the
/// pass's table of finding changes (dropped when the pass's transaction ends). Read under
/// the pass's customer lock, like the fan-out's subscriptions.
pub(crate) async fn track_lifecycle(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
) -> QueryResult<bool> {
    let lifecycle: Vec<&str> = EventType::LIFECYCLE.iter().map(|e| e.as_str()).collect();
    let listening: bool = diesel::select(diesel::dsl::exists(
        webhook_subscriptions::table
            .filter(webhook_subscriptions::customer_id.eq(customer))
            .filter(webhook_subscriptions::active)
            .filter(webhook_subscriptions::disabled_at.is_null())
            .filter(webhook_subscriptions::event_types.overlaps_with(lifecycle)),
    ))
    .get_result(&mut *conn)
    .await?;
    if listening {
        diesel::sql_query(
            "CREATE TEMP TABLE IF NOT EXISTS pass_finding_changes ( \
                 id text NOT NULL, field text NOT NULL, from_value text NOT NULL, \
                 to_value text NOT NULL, PRIMARY KEY (id, field)) ON COMMIT DROP",
        )
        .execute(conn)
        .await?;
    }
    Ok(listening)
}

/// Queues the lifecycle events of a pass from its finding changes (see [`CHANGES`] and
/// [`queue`]).
pub(crate) async fn fan_out_changes(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    pass: PassId,
    at: DateTime<Utc>,
) -> QueryResult<usize> {
    queue(conn, CHANGES, (customer, pass, at)).await
}
