//! The webhook outbox: fan-out in the pass's transaction, claims with `FOR UPDATE SKIP
//! LOCKED` and a lease, attempts, `LISTEN/NOTIFY` wake-ups, and operator views.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::{
    QueryableByName,
    prelude::*,
    sql_types::{Bool, Integer, Nullable, Text, Timestamptz, Uuid as SqlUuid},
};
use diesel_async::{AsyncConnection, RunQueryDsl};
use futures_util::StreamExt as _;
use posture_domain::{
    CustomerScope, DeliveryId, Error, Page, PageRequest, Result, WebhookId,
    delivery::{
        Attempt, ClaimedDelivery, Delivery, DeliveryFilter, DeliveryStatus, DeliveryTarget,
        NextStep, QueueDepth,
    },
    fair_share::{ClaimRequest, LATENCY_WEIGHT_TENTHS},
    ports::DeliveryRepository,
    secrets::SealedSecret,
};

use crate::{
    PgStore,
    error::{corrupt, db_error},
    schema::webhook_deliveries,
    spanning::{Spanning, across_customers},
};

mod claims;
mod fanout;
mod log;
mod rows;

pub(crate) use fanout::{fan_out, last_event, record_changes, record_events};

pub(crate) use rows::DELIVERY_COLUMNS;
use rows::DeliveryRow;

impl PgStore {
    async fn listen(&self, timeout: Duration) -> Result<bool> {
        let mut slot = self.listener.0.lock().await;
        if slot.is_none() {
            let mut conn = self
                .listen
                .connect()
                .await
                .map_err(|e| Error::Unavailable(Box::new(e)))?;
            diesel::sql_query(format!("LISTEN {}", crate::wake::DELIVERY_CHANNEL))
                .execute(&mut conn)
                .await
                .map_err(db_error)?;
            *slot = Some(conn);
            // What committed between the caller's last claim and this LISTEN sent its word
            // to nobody: answer "woken" so that the caller claims once more, now listening.
            return Ok(true);
        }
        let Some(conn) = slot.as_mut() else {
            return Ok(false);
        };
        let next = {
            let mut notifications = std::pin::pin!(conn.notifications_stream());
            let first = tokio::time::timeout(timeout, notifications.next()).await;
            // Several passes may have notified: one wake-up serves them all.
            while let Ok(Some(Ok(_))) =
                tokio::time::timeout(Duration::ZERO, notifications.next()).await
            {}
            first
        };
        match next {
            Err(_) => Ok(false),
            Ok(Some(Ok(_))) => Ok(true),
            // The connection broke: reconnect next time; polling covers the gap.
            Ok(Some(Err(e))) => {
                *slot = None;
                Err(Error::Unavailable(Box::new(e)))
            }
            Ok(None) => {
                *slot = None;
                Err(Error::internal("the LISTEN connection closed"))
            }
        }
    }
}

#[async_trait]
impl DeliveryRepository for PgStore {
    async fn claim_due(&self, claim: &ClaimRequest<'_>) -> Result<Vec<ClaimedDelivery>> {
        let mut conn = self.conn().await?;
        let mut rows = if self.on_citus(&mut conn).await.map_err(db_error)? {
            claims::claim_per_customer(&mut conn, claim).await
        } else {
            claims::claim(&mut conn, claim).await
        }
        .map_err(db_error)?;
        // Oldest due first, as claimed (RETURNING keeps no order).
        rows.sort_by_key(|row| row.delivery.claim_order());
        rows.into_iter()
            .map(|row| {
                Ok(ClaimedDelivery {
                    delivery: row.delivery.try_into()?,
                    target: DeliveryTarget {
                        url: row.webhook_url,
                        webhook_type: row
                            .webhook_type
                            .parse()
                            .map_err(|e| corrupt("webhook type", e))?,
                        secret: SealedSecret {
                            key_id: row.secret_key_id,
                            nonce: row.secret_nonce,
                            ciphertext: row.secret_ciphertext,
                        },
                        previous_secret: match (
                            row.previous_key_id,
                            row.previous_nonce,
                            row.previous_ciphertext,
                        ) {
                            (Some(key_id), Some(nonce), Some(ciphertext)) => Some(SealedSecret {
                                key_id,
                                nonce,
                                ciphertext,
                            }),
                            _ => None,
                        },
                    },
                    body: row.body,
                    snapshot: row
                        .snapshot
                        .map(|packed| crate::compressed::unpack(&packed, "delivery body"))
                        .transpose()?,
                })
            })
            .collect()
    }

    async fn keep_snapshot(&self, delivery: &Delivery, snapshot: &[u8]) -> Result<Vec<u8>> {
        #[derive(QueryableByName)]
        struct Kept {
            #[diesel(sql_type = diesel::sql_types::Bytea)]
            findings: Vec<u8>,
        }
        let Some(pass) = delivery.pass_id else {
            return Err(Error::internal(
                "a delivery of no pass (a test) carries its own body",
            ));
        };
        let packed = crate::compressed::pack(snapshot)?;
        let mut conn = self.conn().await?;
        let key = (
            delivery.customer_id.as_uuid(),
            pass.as_uuid(),
            delivery.event_type.as_str(),
            i32::try_from(delivery.chunk).unwrap_or(i32::MAX),
        );
        let inserted: Option<Kept> = diesel::sql_query(
            "INSERT INTO webhook_bodies (customer_id, pass_id, event_type, chunk, findings, \
                                         created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (customer_id, pass_id, event_type, chunk) DO NOTHING \
             RETURNING findings",
        )
        .bind::<SqlUuid, _>(key.0)
        .bind::<SqlUuid, _>(key.1)
        .bind::<Text, _>(key.2)
        .bind::<Integer, _>(key.3)
        .bind::<diesel::sql_types::Bytea, _>(&packed)
        .bind::<Timestamptz, _>(delivery.created_at)
        .get_result(&mut conn)
        .await
        .optional()
        .map_err(db_error)?;
        if inserted.is_some() {
            return Ok(snapshot.to_vec());
        }
        // Another worker kept the chunk's first (the insert waited for it to commit): its
        // snapshot is what every delivery of the chunk sends, this one's included. Read in a
        // statement of its own, which sees that commit.
        let kept: Kept = diesel::sql_query(
            "SELECT findings FROM webhook_bodies \
             WHERE customer_id = $1 AND pass_id = $2 AND event_type = $3 AND chunk = $4",
        )
        .bind::<SqlUuid, _>(key.0)
        .bind::<SqlUuid, _>(key.1)
        .bind::<Text, _>(key.2)
        .bind::<Integer, _>(key.3)
        .get_result(&mut conn)
        .await
        .map_err(db_error)?;
        crate::compressed::unpack(&kept.findings, "delivery body")
    }

    async fn purge_snapshots(&self, cutoff: DateTime<Utc>, batch: u32) -> Result<u64> {
        self.purge_bodies(cutoff, batch).await
    }

    async fn finish_attempt(
        &self,
        worker: &str,
        delivery: &Delivery,
        attempt: &Attempt,
        next: NextStep,
    ) -> Result<()> {
        // Whatever the receiver sent is made storable first (a NUL would fail the insert).
        let attempt = &attempt.storable();
        let customer = delivery.customer_id.as_uuid();
        let id = delivery.id.as_uuid();
        let (status, next_at, delivered): (&str, Option<DateTime<Utc>>, bool) = match next {
            NextStep::Delivered => ("delivered", None, true),
            NextStep::RetryAt(at) => ("pending", Some(at), false),
            NextStep::Failed | NextStep::Gone => ("failed", None, false),
        };
        // One statement (atomic, one round trip): the attempt; the delivery, if this worker
        // still holds it; the subscription's moving average latency (its own table: an
        // attempt never waits for a pass's lock on the subscription), fed by every attempt
        // made, whoever holds the delivery by now; the subscription's failure clock — started by
        // the first failure since the last success, stopped by a success, written only
        // when it changes. On Citus every part runs on the customer's node alone: the
        // latency is inserted from values, not selected from `delivery`, since an
        // INSERT ... SELECT from a CTE sends the CTE's rows to every node first, and would
        // fail while any node is down, whoever the customer.
        let weight = LATENCY_WEIGHT_TENTHS;
        let record = diesel::sql_query(format!(
            "WITH attempt AS ( \
                 INSERT INTO webhook_attempts (customer_id, delivery_id, attempt, started_at, \
                     latency_ms, status_code, error, response_excerpt, worker, detail) \
                 SELECT $1, $2, COALESCE(max(attempt), 0) + 1, $3, $4, $8, $6, $9, $7, $12 \
                 FROM webhook_attempts WHERE customer_id = $1 AND delivery_id = $2 \
                 RETURNING 1), \
             delivery AS ( \
                 UPDATE webhook_deliveries SET status = $10, attempts = attempts + 1, \
                    next_attempt_at = COALESCE($11, next_attempt_at), \
                    delivered_at = CASE WHEN $5 THEN now() ELSE delivered_at END, \
                    last_error = $6, lease_until = NULL, leased_by = NULL, \
                    last_attempt_at = $3, last_status_code = $8 \
                 WHERE customer_id = $1 AND id = $2 AND leased_by = $7 \
                 RETURNING subscription_id), \
             latency AS ( \
                 INSERT INTO webhook_latency (customer_id, subscription_id, latency_ms, \
                                              updated_at) \
                 VALUES ($1, $13, $4, now()) \
                 ON CONFLICT (customer_id, subscription_id) DO UPDATE \
                    SET latency_ms = ((10 - {weight})::int8 * webhook_latency.latency_ms \
                                      + {weight}::int8 * excluded.latency_ms) / 10, \
                        updated_at = excluded.updated_at) \
             UPDATE webhook_subscriptions s \
                SET failing_since = CASE WHEN $5 THEN NULL ELSE now() END \
             FROM delivery \
             WHERE s.customer_id = $1 AND s.id = delivery.subscription_id \
               AND (s.failing_since IS NULL) <> $5",
        ))
        .bind::<SqlUuid, _>(customer)
        .bind::<SqlUuid, _>(id)
        .bind::<Timestamptz, _>(attempt.started_at)
        .bind::<Integer, _>(i32::try_from(attempt.latency_ms).unwrap_or(i32::MAX))
        .bind::<Bool, _>(delivered)
        .bind::<Nullable<Text>, _>(attempt.error.clone())
        .bind::<Text, _>(worker.to_owned())
        .bind::<Nullable<diesel::sql_types::SmallInt>, _>(attempt.status_code.map(|s| s as i16))
        .bind::<Nullable<Text>, _>(attempt.response_excerpt.clone())
        .bind::<Text, _>(status)
        .bind::<Nullable<Timestamptz>, _>(next_at)
        .bind::<Nullable<Text>, _>(attempt.detail.clone())
        .bind::<SqlUuid, _>(delivery.subscription_id.as_uuid());
        let mut conn = self.conn().await?;
        if next != NextStep::Gone {
            return record
                .execute(&mut conn)
                .await
                .map(|_| ())
                .map_err(db_error);
        }
        // 410: failed, and the subscription deactivated with it. The subscription is locked
        // first, as a pass's fan-out locks it before it writes deliveries: recording the
        // attempt first would hold the delivery log's totals while waiting for a pass that
        // waits for them (migration 000027).
        conn.transaction(async |conn| {
            diesel::sql_query(
                "SELECT 1 FROM webhook_subscriptions WHERE customer_id = $1 AND id = $2 FOR UPDATE",
            )
            .bind::<SqlUuid, _>(customer)
            .bind::<SqlUuid, _>(delivery.subscription_id.as_uuid())
            .execute(conn)
            .await?;
            record.execute(conn).await?;
            crate::webhooks::deactivate(conn, customer, delivery.subscription_id.as_uuid()).await?;
            Ok::<_, diesel::result::Error>(())
        })
        .await
        .map_err(db_error)
    }

    async fn queue_depth(&self) -> Result<QueueDepth> {
        #[derive(QueryableByName)]
        struct Depth {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            pending: i64,
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            due: i64,
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            oldest_due_secs: i64,
        }
        let mut conn = self.conn().await?;
        let depth: Depth = across_customers(&mut conn, Spanning::QueueDepth, |conn| {
            Box::pin(
                diesel::sql_query(
                    "SELECT count(*) AS pending, \
                            count(*) FILTER (WHERE next_attempt_at <= now()) AS due, \
                            coalesce(extract(epoch FROM now() - min(next_attempt_at) \
                                     FILTER (WHERE next_attempt_at <= now())), 0)::int8 \
                                AS oldest_due_secs \
                     FROM webhook_deliveries WHERE status = 'pending'",
                )
                .get_result(conn),
            )
        })
        .await
        .map_err(db_error)?;
        Ok(QueueDepth {
            pending: depth.pending.max(0) as u64,
            due: depth.due.max(0) as u64,
            oldest_due_secs: depth.oldest_due_secs.max(0) as u64,
        })
    }

    async fn wait_for_work(&self, timeout: Duration) -> Result<bool> {
        self.listen(timeout).await
    }

    async fn list_deliveries(
        &self,
        scope: CustomerScope,
        subscription: Option<WebhookId>,
        status: Option<DeliveryStatus>,
        limit: u32,
    ) -> Result<Vec<Delivery>> {
        let mut conn = self.conn().await?;
        let mut query = webhook_deliveries::table
            .filter(webhook_deliveries::customer_id.eq(scope.customer_id().as_uuid()))
            .filter(webhook_deliveries::event_type.eq_any(log::known_event_types()))
            .into_boxed();
        if let Some(status) = status {
            query = query.filter(webhook_deliveries::status.eq(status.as_str()));
        }
        if let Some(subscription) = subscription {
            query = query.filter(webhook_deliveries::subscription_id.eq(subscription.as_uuid()));
        }
        let rows: Vec<DeliveryRow> = query
            .order((
                webhook_deliveries::created_at.desc(),
                webhook_deliveries::chunk,
            ))
            .limit(i64::from(limit))
            .select(DeliveryRow::as_select())
            .load(&mut conn)
            .await
            .map_err(db_error)?;
        rows.into_iter().map(Delivery::try_from).collect()
    }

    async fn retry_delivery(&self, id: DeliveryId) -> Result<Delivery> {
        let mut conn = self.conn().await?;
        log::requeue_one(&mut conn, None, None, id).await
    }

    async fn delivery(&self, scope: CustomerScope, id: DeliveryId) -> Result<Delivery> {
        let mut conn = self.conn().await?;
        webhook_deliveries::table
            .find((scope.customer_id().as_uuid(), id.as_uuid()))
            .select(DeliveryRow::as_select())
            .first(&mut conn)
            .await
            .optional()
            .map_err(db_error)?
            .ok_or(Error::NotFound)?
            .try_into()
    }

    async fn attempts(&self, scope: CustomerScope, id: DeliveryId) -> Result<Vec<Attempt>> {
        let mut conn = self.conn().await?;
        rows::load_attempts(&mut conn, scope, id)
            .await
            .map_err(db_error)
    }

    async fn subscription_deliveries(
        &self,
        scope: CustomerScope,
        subscription: WebhookId,
        filter: &DeliveryFilter,
        page: PageRequest,
    ) -> Result<Page<Delivery>> {
        self.log_page(scope, subscription, filter, page).await
    }

    async fn subscription_delivery(
        &self,
        scope: CustomerScope,
        subscription: WebhookId,
        id: DeliveryId,
    ) -> Result<(Delivery, Vec<Attempt>)> {
        self.log_entry(scope, subscription, id).await
    }

    async fn redeliver(
        &self,
        scope: CustomerScope,
        subscription: WebhookId,
        id: DeliveryId,
    ) -> Result<Delivery> {
        let mut conn = self.conn().await?;
        log::requeue_one(
            &mut conn,
            Some(scope.customer_id().as_uuid()),
            Some(subscription.as_uuid()),
            id,
        )
        .await
    }

    async fn recover(
        &self,
        scope: CustomerScope,
        subscription: WebhookId,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<u64> {
        self.requeue_window(scope, subscription, since, until).await
    }

    async fn record_test(
        &self,
        scope: CustomerScope,
        delivery: &Delivery,
        body: &[u8],
        attempt: &Attempt,
    ) -> Result<()> {
        self.insert_test(scope, delivery, body, attempt).await
    }

    async fn purge_finished(&self, cutoff: DateTime<Utc>, batch: u32) -> Result<u64> {
        self.purge(cutoff, batch).await
    }

    async fn disable_failing(
        &self,
        failing_before: DateTime<Utc>,
    ) -> Result<Vec<(posture_domain::CustomerId, WebhookId)>> {
        crate::webhooks::disable_failing(self, failing_before).await
    }

    async fn expire_holds_and_secrets(&self, held_before: DateTime<Utc>) -> Result<(u64, u64)> {
        crate::webhooks::expire_holds_and_secrets(self, held_before).await
    }
}
