//! Claiming due deliveries: `FOR UPDATE SKIP LOCKED` and a lease, so that any number of
//! workers share the queue without sending one delivery twice at once.
//!
//! On one PostgreSQL node a claim is one statement over every customer's due deliveries
//! (after cancelling those of deactivated subscriptions). Citus runs `FOR UPDATE` only in a
//! statement that reaches one shard, so there the worker first asks every shard which
//! customers have deliveries due, oldest first (without locks), then claims customer by
//! customer, each claim on that customer's node.

use std::time::Duration;

use diesel::{
    QueryResult, QueryableByName,
    sql_types::{BigInt, Bytea, Double, Nullable, Text, Uuid as SqlUuid},
};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::delivery::DeliveryEvent;
use uuid::Uuid;

use super::rows::{DELIVERY_COLUMNS, DeliveryRow};
use crate::spanning::{Spanning, across_customers};

#[derive(QueryableByName)]
pub(super) struct ClaimRow {
    #[diesel(embed)]
    pub(super) delivery: DeliveryRow,
    #[diesel(sql_type = Nullable<Bytea>)]
    pub(super) body: Option<Vec<u8>>,
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

/// The claim: the oldest due deliveries that no lease holds, leased to `$1` for `$3`
/// seconds, at most `$2`; with what sending them takes. `{customer}` narrows it to one
/// customer.
fn claim_statement(customer: &str) -> String {
    // Whether the previous secret still signs is decided with the claim, not in RETURNING
    // (Citus allows no function there but immutable ones).
    let overlap = "CASE WHEN due.overlap THEN";
    // A delivery of an event type this build does not know (written by a newer ingest
    // during a rolling upgrade) waits for a worker that knows it.
    let known = known_types();
    format!(
        "WITH due AS ( \
             SELECT d.customer_id, d.id, \
                    coalesce(s.previous_secret_expires_at > now(), false) AS overlap \
             FROM webhook_deliveries d \
             JOIN webhook_subscriptions s \
               ON s.customer_id = d.customer_id AND s.id = d.subscription_id AND s.active \
              AND s.paused_at IS NULL AND s.disabled_at IS NULL \
             WHERE d.status = 'pending' AND d.next_attempt_at <= now() \
               AND (d.lease_until IS NULL OR d.lease_until < now()) {customer} \
               AND d.event_type IN ({known}) \
             ORDER BY d.next_attempt_at LIMIT $2 FOR UPDATE OF d SKIP LOCKED) \
         UPDATE webhook_deliveries d \
            SET lease_until = now() + make_interval(secs => $3), leased_by = $1 \
         FROM due, webhook_subscriptions s \
         WHERE d.customer_id = due.customer_id AND d.id = due.id \
           AND s.customer_id = d.customer_id AND s.id = d.subscription_id {customer} \
         RETURNING {DELIVERY_COLUMNS}, d.body, s.webhook_url, s.webhook_type, \
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

/// One PostgreSQL node: every customer's due deliveries in one statement.
pub(super) async fn claim(
    conn: &mut AsyncPgConnection,
    worker: &str,
    limit: u32,
    lease: Duration,
) -> QueryResult<Vec<ClaimRow>> {
    diesel::sql_query(cancel_orphans("")).execute(conn).await?;
    diesel::sql_query(claim_statement(""))
        .bind::<Text, _>(worker)
        .bind::<BigInt, _>(i64::from(limit))
        .bind::<Double, _>(lease.as_secs_f64())
        .load(conn)
        .await
}

/// Citus: the customers with deliveries due, oldest first, then a claim on each customer's
/// node until `limit` are claimed.
///
/// The customers come from each shard on its own (`run_command_on_shards`, which reports a
/// shard it cannot reach instead of failing): while a worker node is down, its customers'
/// deliveries wait and every other customer's go on. A customer whose claim fails (its node
/// went away meanwhile) is skipped until the next claim.
pub(super) async fn claim_per_customer(
    conn: &mut AsyncPgConnection,
    worker: &str,
    limit: u32,
    lease: Duration,
) -> QueryResult<Vec<ClaimRow>> {
    let due = due_customers(conn, limit).await?;
    let one = "AND d.customer_id = $4";
    let mut claimed: Vec<ClaimRow> = Vec::new();
    let mut failure = None;
    for customer_id in due {
        let left = i64::from(limit) - claimed.len() as i64;
        if left <= 0 {
            break;
        }
        let rows = async {
            diesel::sql_query(cancel_orphans("AND d.customer_id = $1"))
                .bind::<SqlUuid, _>(customer_id)
                .execute(conn)
                .await?;
            diesel::sql_query(claim_statement(one))
                .bind::<Text, _>(worker)
                .bind::<BigInt, _>(left)
                .bind::<Double, _>(lease.as_secs_f64())
                .bind::<SqlUuid, _>(customer_id)
                .load::<ClaimRow>(conn)
                .await
        }
        .await;
        match rows {
            Ok(rows) => claimed.extend(rows),
            Err(e) => {
                tracing::warn!(customer.id = %customer_id, error = %e, "claiming a customer's deliveries failed; its deliveries wait for the next claim");
                failure = Some(e);
            }
        }
    }
    match failure {
        Some(e) if claimed.is_empty() => Err(e),
        _ => Ok(claimed),
    }
}

/// The customers with deliveries due, oldest due first, at most `limit`: each shard's
/// answer, from every shard that answers.
async fn due_customers(conn: &mut AsyncPgConnection, limit: u32) -> QueryResult<Vec<Uuid>> {
    #[derive(QueryableByName)]
    struct ShardAnswer {
        #[diesel(sql_type = Nullable<Text>)]
        result: Option<String>,
        #[diesel(sql_type = diesel::sql_types::Bool)]
        success: bool,
    }
    // `%s` is each shard's name; the answer is JSON text: [[customer, due epoch], ...].
    let per_shard = format!(
        "SELECT coalesce(json_agg(json_build_array(customer_id, \
                                                   extract(epoch FROM due))), ''[]'')::text \
         FROM (SELECT customer_id, min(next_attempt_at) AS due FROM %s \
               WHERE status = ''pending'' AND next_attempt_at <= now() \
                 AND (lease_until IS NULL OR lease_until < now()) \
               GROUP BY customer_id ORDER BY 2 LIMIT {limit}) due"
    );
    let answers: Vec<ShardAnswer> = across_customers(conn, Spanning::DueCustomers, |conn| {
        Box::pin(
            diesel::sql_query(format!(
                "SELECT result, success \
                 FROM run_command_on_shards('webhook_deliveries', '{per_shard}')"
            ))
            .load(conn),
        )
    })
    .await?;
    let mut due: Vec<(f64, Uuid)> = Vec::new();
    for answer in answers {
        let Some(text) = answer.result.filter(|_| answer.success) else {
            tracing::warn!("a shard of the outbox did not answer: its customers' deliveries wait");
            continue;
        };
        let pairs: Vec<(Uuid, f64)> = serde_json::from_str(&text)
            .map_err(|e| diesel::result::Error::DeserializationError(Box::new(e)))?;
        due.extend(pairs.into_iter().map(|(customer, at)| (at, customer)));
    }
    due.sort_by(|a, b| a.0.total_cmp(&b.0));
    due.truncate(limit as usize);
    Ok(due.into_iter().map(|(_, customer)| customer).collect())
}
