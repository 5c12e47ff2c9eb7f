//! Claiming due deliveries fairly: `FOR UPDATE SKIP LOCKED` and a lease, so that any number
//! of workers share the queue without sending one delivery twice at once, and the bounds of
//! `posture_domain::fair_share`, so that no customer or receiver holds every slot.
//!
//! A claim is for one lane: the subscriptions whose moving average latency
//! (`webhook_latency`) is under the slow threshold (the prompt lane; one never measured
//! too), or at it (the slow lane). Within the lane it takes, per subscription, its oldest due
//! deliveries up to what the subscription may still have in flight (its leases counted over
//! every worker), then hands them out round-robin: each customer's first, then each
//! customer's second, a customer's own turns going round its subscriptions the same way,
//! each customer up to the room the worker gave it. A customer's turns count from the
//! deliveries it has in flight already, so a customer with none comes before one with many
//! (even when the other's deliveries have waited longer: waiting is not a right to more
//! slots). Claims take turns (an advisory lock held for the claim's transaction), so the
//! count of leases in flight is exact.
//!
//! On one PostgreSQL node a claim is one statement over every subscription with deliveries
//! pending (found by a skip scan of the queue's index, one probe per subscription, not per
//! delivery). Citus runs `FOR UPDATE` only in a statement that reaches one shard, so there
//! the worker first asks every shard which customers have deliveries due (without locks),
//! then claims customer by customer, each claim on that customer's node, sharing the
//! claim's size out between them.

use diesel::{
    QueryResult, QueryableByName,
    sql_types::{Array, BigInt, Bool, Bytea, Double, Integer, Nullable, Text, Uuid as SqlUuid},
};
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    delivery::DeliveryEvent,
    fair_share::{ClaimRequest, Lane},
};
use uuid::Uuid;

use super::rows::{DELIVERY_COLUMNS, DeliveryRow};
use crate::spanning::{Spanning, across_customers};

/// The advisory lock claims take turns on (arbitrary but fixed; migrations use another).
const CLAIM_LOCK: i64 = 0x706f_7374_7572_6510;

#[derive(QueryableByName)]
pub(super) struct ClaimRow {
    #[diesel(embed)]
    pub(super) delivery: DeliveryRow,
    #[diesel(sql_type = Nullable<Bytea>)]
    pub(super) body: Option<Vec<u8>>,
    /// The chunk's snapshot, as stored (packed).
    #[diesel(sql_type = Nullable<Bytea>)]
    pub(super) snapshot: Option<Vec<u8>>,
    #[diesel(sql_type = Text)]
    pub(super) webhook_url: String,
    #[diesel(sql_type = Text)]
    pub(super) webhook_type: String,
    #[diesel(sql_type = Text)]
    pub(super) secret_key_id: String,
    #[diesel(sql_type = Bytea)]
    pub(super) secret_nonce: Vec<u8>,
    #[diesel(sql_type = Bytea)]
    pub(super) secret_ciphertext: Vec<u8>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) previous_key_id: Option<String>,
    #[diesel(sql_type = Nullable<Bytea>)]
    pub(super) previous_nonce: Option<Vec<u8>>,
    #[diesel(sql_type = Nullable<Bytea>)]
    pub(super) previous_ciphertext: Option<Vec<u8>>,
}

/// Deliveries whose subscription was deactivated (a pass's fan-out can commit just after a
/// deactivation cancelled what it could see) are cancelled when met, and never take a place
/// in the batch: the limit applies to deliverable rows only. `{customer}` narrows it to one
/// customer.
fn cancel_orphans(customer: &str) -> String {
    format!(
        "UPDATE webhook_deliveries d \
            SET status = 'cancelled', lease_until = NULL, leased_by = NULL \
         FROM webhook_subscriptions s \
         WHERE d.status = 'pending' AND d.next_attempt_at <= now() \
           AND s.customer_id = d.customer_id AND s.id = d.subscription_id \
           AND (NOT s.active OR s.disabled_at IS NOT NULL) {customer}"
    )
}

/// Where a claim looks for subscriptions with deliveries pending.
enum Queues {
    /// Every customer's: a skip scan of the queue's index (one probe per subscription).
    Everyone,
    /// One customer's (`$10`): its subscriptions (25 active at most).
    OneCustomer,
}

/// The claim (parameters below), leasing to `$1` for `$3` seconds at most `$2` deliveries of
/// the lane `$4` (slow: true), the slow threshold being `$5` ms, each subscription having at
/// most `$6` in flight, each customer taking at most `$9` minus what the worker holds of it
/// (`$7` customers, `$8` their counts); with what sending them takes. The deliveries are
/// ranked by turn: a customer's n-th candidate (its subscriptions in turn) plus what it has
/// in flight on the lane, then oldest due.
fn claim_statement(queues: &Queues) -> String {
    // `{one}`: every table of the statement narrowed to the customer on Citus, so that each
    // reference is pruned to the customer's shard (a router query, where `FOR UPDATE` runs).
    let (queues, one, one_body) = match queues {
        Queues::Everyone => (
            "WITH RECURSIVE queues AS ( \
                 (SELECT customer_id, subscription_id FROM webhook_deliveries \
                  WHERE status = 'pending' ORDER BY customer_id, subscription_id LIMIT 1) \
                 UNION ALL \
                 SELECT n.customer_id, n.subscription_id FROM queues q \
                 CROSS JOIN LATERAL ( \
                     SELECT customer_id, subscription_id FROM webhook_deliveries \
                     WHERE status = 'pending' \
                       AND (customer_id, subscription_id) > (q.customer_id, q.subscription_id) \
                     ORDER BY customer_id, subscription_id LIMIT 1) n)"
                .to_owned(),
            String::new(),
            String::new(),
        ),
        Queues::OneCustomer => (
            "WITH queues AS ( \
                 SELECT customer_id, id AS subscription_id FROM webhook_subscriptions \
                 WHERE customer_id = $10 AND active)"
                .to_owned(),
            " AND d.customer_id = $10".to_owned(),
            " AND b.customer_id = $10".to_owned(),
        ),
    };
    // Whether the previous secret still signs is decided with the claim, not in RETURNING
    // (Citus allows no function there but immutable ones).
    let overlap = "CASE WHEN locked.overlap THEN";
    // A delivery of an event type this build does not know (written by a newer ingest
    // during a rolling upgrade) waits for a worker that knows it.
    let known = known_types();
    format!(
        "{queues}, \
         measured AS ( \
             SELECT q.customer_id, q.subscription_id, \
                    coalesce(s.previous_secret_expires_at > now(), false) AS overlap, \
                    (SELECT count(*) FROM webhook_deliveries d \
                     WHERE d.customer_id = q.customer_id \
                       AND d.subscription_id = q.subscription_id \
                       AND d.status = 'pending' AND d.lease_until >= now(){one}) AS busy \
             FROM queues q \
             JOIN webhook_subscriptions s \
               ON s.customer_id = q.customer_id AND s.id = q.subscription_id AND s.active \
              AND s.paused_at IS NULL AND s.disabled_at IS NULL \
             LEFT JOIN webhook_latency l \
               ON l.customer_id = q.customer_id AND l.subscription_id = q.subscription_id \
             WHERE (coalesce(l.latency_ms, 0) >= $5) = $4), \
         lane AS ( \
             SELECT measured.*, $6 - busy AS room, \
                    sum(busy) OVER (PARTITION BY customer_id) AS customer_busy \
             FROM measured), \
         due AS ( \
             SELECT lane.customer_id, lane.subscription_id, lane.overlap, \
                    lane.customer_busy, x.id, x.next_attempt_at, x.chunk, \
                    row_number() OVER (PARTITION BY lane.customer_id, lane.subscription_id \
                                       ORDER BY x.next_attempt_at, x.chunk, x.id) AS turn \
             FROM lane CROSS JOIN LATERAL ( \
                 SELECT d.id, d.next_attempt_at, d.chunk FROM webhook_deliveries d \
                 WHERE d.customer_id = lane.customer_id \
                   AND d.subscription_id = lane.subscription_id \
                   AND d.status = 'pending' AND d.next_attempt_at <= now() \
                   AND (d.lease_until IS NULL OR d.lease_until < now()) \
                   AND d.event_type IN ({known}){one} \
                 ORDER BY d.next_attempt_at, d.chunk LIMIT greatest(lane.room, 0)) x), \
         ranked AS ( \
             SELECT due.*, row_number() OVER (PARTITION BY due.customer_id \
                                              ORDER BY turn, next_attempt_at, chunk, \
                                                       subscription_id, id) AS place \
             FROM due), \
         chosen AS ( \
             SELECT ranked.customer_id, ranked.id, ranked.overlap FROM ranked \
             LEFT JOIN unnest($7::uuid[], $8::int[]) AS held(customer_id, n) \
               ON held.customer_id = ranked.customer_id \
             WHERE ranked.place <= $9 - coalesce(held.n, 0) \
             ORDER BY ranked.place + ranked.customer_busy, ranked.next_attempt_at, \
                      ranked.chunk, ranked.subscription_id, ranked.id \
             LIMIT $2), \
         locked AS ( \
             SELECT d.customer_id, d.id, chosen.overlap, b.findings AS snapshot \
             FROM webhook_deliveries d \
             JOIN chosen ON d.customer_id = chosen.customer_id AND d.id = chosen.id \
             LEFT JOIN webhook_bodies b \
               ON b.customer_id = d.customer_id AND b.pass_id = d.pass_id \
              AND b.event_type = d.event_type AND b.chunk = d.chunk{one_body} \
             WHERE d.status = 'pending' AND (d.lease_until IS NULL OR d.lease_until < now()){one} \
             FOR UPDATE OF d SKIP LOCKED) \
         UPDATE webhook_deliveries d \
            SET lease_until = now() + make_interval(secs => $3), leased_by = $1 \
         FROM locked, webhook_subscriptions s \
         WHERE d.customer_id = locked.customer_id AND d.id = locked.id \
           AND s.customer_id = d.customer_id AND s.id = d.subscription_id{one} \
         RETURNING {DELIVERY_COLUMNS}, d.body, locked.snapshot, s.webhook_url, s.webhook_type, \
                   s.secret_key_id, s.secret_nonce, s.secret_ciphertext, \
                   {overlap} s.previous_secret_key_id END AS previous_key_id, \
                   {overlap} s.previous_secret_nonce END AS previous_nonce, \
                   {overlap} s.previous_secret_ciphertext END AS previous_ciphertext"
    )
}

/// The delivery event types this build knows, as an SQL list of literals (the enum's own
/// snake-case names, never input).
pub(super) fn known_types() -> String {
    DeliveryEvent::ALL
        .iter()
        .map(|event| format!("'{}'", event.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The claim statement of `claim`, bound to `$1`..`$9`; `limit` and the customer room as
/// given.
macro_rules! bind_claim {
    ($statement:expr, $claim:expr, $limit:expr, $per_customer:expr) => {{
        let claim: &ClaimRequest<'_> = $claim;
        let (customers, held): (Vec<Uuid>, Vec<i32>) = claim
            .held
            .iter()
            .map(|(customer, n)| (customer.as_uuid(), i32::try_from(*n).unwrap_or(i32::MAX)))
            .unzip();
        diesel::sql_query($statement)
            .bind::<Text, _>(claim.worker.to_owned())
            .bind::<BigInt, _>(i64::from($limit))
            .bind::<Double, _>(claim.lease.as_secs_f64())
            .bind::<Bool, _>(claim.lane == Lane::Slow)
            .bind::<Integer, _>(claim.share.slow_after_ms())
            .bind::<Integer, _>(i32::try_from(claim.share.per_subscription).unwrap_or(i32::MAX))
            .bind::<Array<SqlUuid>, _>(customers)
            .bind::<Array<Integer>, _>(held)
            .bind::<Integer, _>(i32::try_from($per_customer).unwrap_or(i32::MAX))
    }};
}

/// Takes the claims' turn for this transaction.
async fn take_turn(conn: &mut AsyncPgConnection) -> QueryResult<()> {
    diesel::sql_query(format!("SELECT pg_advisory_xact_lock({CLAIM_LOCK})"))
        .execute(conn)
        .await
        .map(|_| ())
}

/// One PostgreSQL node: every customer's due deliveries of the lane in one statement.
pub(super) async fn claim(
    conn: &mut AsyncPgConnection,
    claim: &ClaimRequest<'_>,
) -> QueryResult<Vec<ClaimRow>> {
    if claim.limit == 0 {
        return Ok(Vec::new());
    }
    let statement = claim_statement(&Queues::Everyone);
    conn.transaction(async |conn| {
        take_turn(conn).await?;
        diesel::sql_query(cancel_orphans("")).execute(conn).await?;
        bind_claim!(statement, claim, claim.limit, claim.per_customer)
            .load(conn)
            .await
    })
    .await
}

/// Citus: the customers with deliveries due on the lane, those with the fewest in flight
/// first (then the oldest due; [`VISITS_PER_SLOT`] per delivery wanted at most), then a
/// claim on each customer's node: first each customer's even share of `limit` (a customer
/// with less due leaves its share to the next), then what is left, in the same order.
///
/// The customers come from each shard on its own (`run_command_on_colocated_placements`,
/// which reports a shard it cannot reach instead of failing): while a worker node is down,
/// its customers' deliveries wait and every other customer's go on. A customer whose claim
/// fails (its node went away meanwhile) is skipped until the next claim.
pub(super) async fn claim_per_customer(
    conn: &mut AsyncPgConnection,
    claim: &ClaimRequest<'_>,
) -> QueryResult<Vec<ClaimRow>> {
    if claim.limit == 0 {
        return Ok(Vec::new());
    }
    let due = due_customers(conn, claim).await?;
    if due.is_empty() {
        return Ok(Vec::new());
    }
    let statement = claim_statement(&Queues::OneCustomer);
    let share = claim
        .limit
        .div_ceil(u32::try_from(due.len()).unwrap_or(u32::MAX));
    let mut claimed: Vec<ClaimRow> = Vec::new();
    let mut failure = None;
    // What each customer may still take: its room on this worker's lane.
    let mut room: Vec<(Uuid, u32)> = due
        .iter()
        .map(|c| {
            let customer = posture_domain::CustomerId::from_uuid(*c);
            (*c, claim.room_of(customer))
        })
        .collect();
    for round_share in [Some(share), None] {
        for (customer_id, left) in &mut room {
            let wanted = claim.limit.saturating_sub(claimed.len() as u32);
            if wanted == 0 {
                break;
            }
            let take = round_share
                .map_or(*left, |share| share.min(*left))
                .min(wanted);
            if take == 0 {
                continue;
            }
            let customer_id = *customer_id;
            let rows = conn
                .transaction(async |conn| {
                    diesel::sql_query("SELECT pg_advisory_xact_lock($1::int4, hashtext($2::text))")
                        .bind::<Integer, _>((CLAIM_LOCK & 0x7fff_ffff) as i32)
                        .bind::<Text, _>(customer_id.to_string())
                        .execute(conn)
                        .await?;
                    diesel::sql_query(cancel_orphans("AND d.customer_id = $1"))
                        .bind::<SqlUuid, _>(customer_id)
                        .execute(conn)
                        .await?;
                    // The room was worked out here: the statement's own is `take`.
                    let alone = ClaimRequest {
                        held: Vec::new(),
                        ..claim.clone()
                    };
                    bind_claim!(statement.as_str(), &alone, take, take)
                        .bind::<SqlUuid, _>(customer_id)
                        .load::<ClaimRow>(conn)
                        .await
                })
                .await;
            match rows {
                Ok(rows) => {
                    let got = rows.len() as u32;
                    *left = if got < take { 0 } else { *left - got };
                    claimed.extend(rows);
                }
                Err(e) => {
                    tracing::warn!(customer.id = %customer_id, error = %e, "claiming a customer's deliveries failed; its deliveries wait for the next claim");
                    *left = 0;
                    failure = Some(e);
                }
            }
        }
    }
    match failure {
        Some(e) if claimed.is_empty() => Err(e),
        _ => Ok(claimed),
    }
}

/// Subscriptions asked of each shard at most (those of the customers with the fewest
/// deliveries in flight, then the oldest due): a claim hands out a few dozen deliveries.
const DUE_SUBSCRIPTIONS_PER_SHARD: u32 = 1000;

/// Customers a claim visits at most, per delivery it may take: each visit is a transaction
/// on the customer's node, and a customer visited may have nothing to give (its
/// subscriptions' room is full, its deliveries are of event types this build does not know).
const VISITS_PER_SLOT: usize = 4;

/// The customers with deliveries due on `claim`'s lane, the fewest in flight first, then the
/// oldest due: each shard's answer, from every shard that answers.
///
/// Each shard finds its subscriptions with deliveries pending by a skip scan of the queue's
/// index (one probe per subscription, never a count of a backlog) and leaves out those
/// paused, disabled or deactivated (beside it on the same node); the lane is then told from
/// the few subscriptions measured slow.
async fn due_customers(
    conn: &mut AsyncPgConnection,
    claim: &ClaimRequest<'_>,
) -> QueryResult<Vec<Uuid>> {
    #[derive(QueryableByName)]
    struct ShardAnswer {
        #[diesel(sql_type = Nullable<Text>)]
        result: Option<String>,
        #[diesel(sql_type = diesel::sql_types::Bool)]
        success: bool,
    }
    // `%1$s` is each shard of the outbox, `%2$s` the subscriptions' shard beside it; the
    // answer is JSON text: [[customer, subscription, in flight, due epoch], ...].
    let limit = DUE_SUBSCRIPTIONS_PER_SHARD;
    let per_shard = format!(
        "WITH RECURSIVE queues AS ( \
             (SELECT customer_id, subscription_id FROM %1$s \
              WHERE status = ''pending'' ORDER BY customer_id, subscription_id LIMIT 1) \
             UNION ALL \
             SELECT n.customer_id, n.subscription_id FROM queues q \
             CROSS JOIN LATERAL ( \
                 SELECT customer_id, subscription_id FROM %1$s \
                 WHERE status = ''pending'' \
                   AND (customer_id, subscription_id) > (q.customer_id, q.subscription_id) \
                 ORDER BY customer_id, subscription_id LIMIT 1) n), \
         heads AS ( \
             SELECT q.customer_id, q.subscription_id, \
                    (SELECT count(*) FROM %1$s d \
                     WHERE d.customer_id = q.customer_id \
                       AND d.subscription_id = q.subscription_id \
                       AND d.status = ''pending'' AND d.lease_until >= now()) AS busy, \
                    (SELECT d.next_attempt_at FROM %1$s d \
                     WHERE d.customer_id = q.customer_id \
                       AND d.subscription_id = q.subscription_id \
                       AND d.status = ''pending'' AND d.next_attempt_at <= now() \
                       AND (d.lease_until IS NULL OR d.lease_until < now()) \
                     ORDER BY d.next_attempt_at, d.chunk LIMIT 1) AS due \
             FROM queues q \
             JOIN %2$s s ON s.customer_id = q.customer_id AND s.id = q.subscription_id \
              AND s.active AND s.paused_at IS NULL AND s.disabled_at IS NULL) \
         SELECT coalesce(json_agg(json_build_array(customer_id, subscription_id, busy, \
                                                   extract(epoch FROM due))), ''[]'')::text \
         FROM (SELECT * FROM (SELECT heads.*, \
                                     sum(busy) OVER (PARTITION BY customer_id) AS customer_busy \
                              FROM heads) w \
               WHERE due IS NOT NULL \
               ORDER BY customer_busy, due LIMIT {limit}) h"
    );
    let slow_after = claim.share.slow_after_ms();
    let (answers, slow) = across_customers(conn, Spanning::DueCustomers, |conn| {
        Box::pin(async move {
            let answers: Vec<ShardAnswer> = diesel::sql_query(format!(
                "SELECT result, success FROM run_command_on_colocated_placements( \
                     'webhook_deliveries', 'webhook_subscriptions', '{per_shard}')"
            ))
            .load(conn)
            .await?;
            // The subscriptions measured slow (few), from every shard that answers.
            let slow: Vec<ShardAnswer> = diesel::sql_query(format!(
                "SELECT result, success FROM run_command_on_shards('webhook_latency', \
                     'SELECT coalesce(json_agg(json_build_array(customer_id, subscription_id)), \
                                      ''[]'')::text \
                      FROM %s WHERE latency_ms >= {slow_after}')"
            ))
            .load(conn)
            .await?;
            Ok((answers, slow))
        })
    })
    .await?;
    let mut measured_slow: std::collections::HashSet<(Uuid, Uuid)> =
        std::collections::HashSet::new();
    for answer in slow {
        // A shard that does not answer is on a node that answers for no delivery either.
        let Some(text) = answer.result.filter(|_| answer.success) else {
            continue;
        };
        let found: Vec<(Uuid, Uuid)> = serde_json::from_str(&text)
            .map_err(|e| diesel::result::Error::DeserializationError(Box::new(e)))?;
        measured_slow.extend(found);
    }
    let wanted_slow = claim.lane == Lane::Slow;
    // Per customer: its deliveries in flight on the lane, and its oldest due on it.
    let mut customers: std::collections::HashMap<Uuid, (u64, f64)> =
        std::collections::HashMap::new();
    // Every shard failing (a statement that cannot run, or every node down): an error the
    // worker logs and retries, never an outbox that silently looks empty.
    if let Some(failed) = answers.iter().find(|a| !a.success)
        && answers.iter().all(|a| !a.success)
    {
        return Err(diesel::result::Error::QueryBuilderError(
            format!(
                "no shard of the outbox answered the claim's scan: {}",
                failed.result.as_deref().unwrap_or("no answer")
            )
            .into(),
        ));
    }
    for answer in answers {
        let Some(text) = answer.result.as_deref().filter(|_| answer.success) else {
            tracing::warn!(
                answer = %posture_domain::outside::one_line(
                    answer.result.as_deref().unwrap_or(""),
                    256
                ),
                "a shard of the outbox did not answer: its customers' deliveries wait"
            );
            continue;
        };
        let found: Vec<(Uuid, Uuid, u64, f64)> = serde_json::from_str(text)
            .map_err(|e| diesel::result::Error::DeserializationError(Box::new(e)))?;
        for (customer, subscription, busy, due) in found {
            if measured_slow.contains(&(customer, subscription)) != wanted_slow {
                continue;
            }
            let entry = customers.entry(customer).or_insert((0, f64::INFINITY));
            entry.0 += busy;
            entry.1 = entry.1.min(due);
        }
    }
    let mut due: Vec<(u64, f64, Uuid)> = customers
        .into_iter()
        .map(|(customer, (busy, at))| (busy, at, customer))
        .collect();
    due.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
    due.truncate((claim.limit as usize).saturating_mul(VISITS_PER_SLOT));
    Ok(due.into_iter().map(|(.., customer)| customer).collect())
}
