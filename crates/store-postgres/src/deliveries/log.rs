//! The delivery log a consumer reads and acts on: a subscription's deliveries newest first,
//! one with its attempts, a redelivery, the recovery of a window, test deliveries, and the
//! retention sweep. Every statement is scoped to the customer, and to an active
//! subscription of it.

use chrono::{DateTime, Utc};
use diesel::{
    prelude::*,
    sql_types::{Integer, Nullable, SmallInt, Text, Timestamptz, Uuid as SqlUuid},
};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    CustomerScope, DeliveryId, Error, Page, PageRequest, Result, WebhookId,
    delivery::{Attempt, Delivery, DeliveryFilter},
    page::{KeyPart, SortKey},
};
use uuid::Uuid;

use crate::{
    PgStore,
    deliveries::{
        DELIVERY_COLUMNS,
        rows::{self, DeliveryRow},
    },
    error::db_error,
    schema::{webhook_deliveries, webhook_delivery_totals, webhook_subscriptions},
    spanning::{Spanning, across_customers},
    sync::after_key,
};

/// `NotFound` unless the subscription is an active one of the customer.
async fn active_subscription(
    conn: &AsyncPgConnection,
    customer: Uuid,
    subscription: Uuid,
) -> Result<()> {
    let found: Option<Uuid> = webhook_subscriptions::table
        .find((customer, subscription))
        .filter(webhook_subscriptions::active)
        .select(webhook_subscriptions::id)
        .first(&mut &*conn)
        .await
        .optional()
        .map_err(db_error)?;
    found.map(|_| ()).ok_or(Error::NotFound)
}

/// The sort key of a log row: newest first, then id (descending).
fn log_key(delivery: &Delivery) -> SortKey {
    SortKey(vec![
        KeyPart::Time(delivery.created_at),
        KeyPart::Text(delivery.id.to_string()),
    ])
}

/// Makes one delivery that is not pending pending again, due now, on a fresh schedule. The
/// subscription must be active; `customer`/`subscription` scope the statement when given.
/// An operator retries by id alone: the delivery's customer is found first (a statement
/// across customers), so that the change itself names its customer (on Citus, it runs on
/// that customer's node).
pub(crate) async fn requeue_one(
    conn: &mut AsyncPgConnection,
    customer: Option<Uuid>,
    subscription: Option<Uuid>,
    id: DeliveryId,
) -> Result<Delivery> {
    let scoped = customer.is_some();
    let customer = match customer {
        Some(customer) => customer,
        None => customer_of(conn, id).await?.ok_or(Error::NotFound)?,
    };
    let row: Option<DeliveryRow> = diesel::sql_query(format!(
        "UPDATE webhook_deliveries d SET status = 'pending', trigger = 'redelivery', \
                schedule_start = d.attempts, next_attempt_at = now(), lease_until = NULL, \
                leased_by = NULL \
         FROM webhook_subscriptions s \
         WHERE d.customer_id = $2 AND d.id = $1 \
           AND ($3::uuid IS NULL OR d.subscription_id = $3) AND d.status <> 'pending' \
           AND s.customer_id = $2 AND s.active AND s.id = d.subscription_id \
         RETURNING {DELIVERY_COLUMNS}"
    ))
    .bind::<SqlUuid, _>(id.as_uuid())
    .bind::<SqlUuid, _>(customer)
    .bind::<Nullable<SqlUuid>, _>(subscription)
    .get_result(&mut *conn)
    .await
    .optional()
    .map_err(db_error)?;
    if let Some(row) = row {
        crate::wake::notify_workers(conn).await.map_err(db_error)?;
        return row.try_into();
    }
    let mut query = webhook_deliveries::table
        .inner_join(
            webhook_subscriptions::table.on(webhook_subscriptions::customer_id
                .eq(webhook_deliveries::customer_id)
                .and(webhook_subscriptions::id.eq(webhook_deliveries::subscription_id))),
        )
        .filter(webhook_deliveries::customer_id.eq(customer))
        .filter(webhook_subscriptions::customer_id.eq(customer))
        .filter(webhook_deliveries::id.eq(id.as_uuid()))
        .into_boxed();
    if let Some(subscription) = subscription {
        query = query.filter(webhook_deliveries::subscription_id.eq(subscription));
    }
    let found: Option<(String, bool)> = query
        .select((webhook_deliveries::status, webhook_subscriptions::active))
        .first(conn)
        .await
        .optional()
        .map_err(db_error)?;
    match found {
        // A scoped caller does not learn of another subscription's or customer's delivery.
        None => Err(Error::NotFound),
        Some((_, false)) if scoped => Err(Error::NotFound),
        Some((_, false)) => Err(Error::Conflict(
            "the delivery's subscription is deactivated".into(),
        )),
        // Only a pending delivery is refused: it is queued (waiting for its first attempt or
        // for a retry) and the worker will send it by itself.
        Some((status, true)) => Err(Error::Conflict(format!(
            "the delivery is {status}: it is queued and will be attempted by itself; wait \
             for its outcome"
        ))),
    }
}

/// The customer of a delivery known by its id alone (an operator's command).
async fn customer_of(conn: &mut AsyncPgConnection, id: DeliveryId) -> Result<Option<Uuid>> {
    across_customers(conn, Spanning::DeliveryById, |conn| {
        Box::pin(async move {
            webhook_deliveries::table
                .filter(webhook_deliveries::id.eq(id.as_uuid()))
                .select(webhook_deliveries::customer_id)
                .first::<Uuid>(conn)
                .await
                .optional()
        })
    })
    .await
    .map_err(db_error)
}

/// The delivery event types this build knows.
pub(super) fn known_event_types() -> Vec<&'static str> {
    posture_domain::delivery::DeliveryEvent::ALL
        .iter()
        .map(|event| event.as_str())
        .collect()
}

/// `meta.total` of a page of the log: summed from the subscription's totals by event type
/// and state (migration 000027: a few rows, however long the log), or, with `createdSince`
/// (which the totals do not know), counted over the log's index.
async fn count_log<'a>(
    conn: &AsyncPgConnection,
    customer: Uuid,
    subscription: Uuid,
    filter: &DeliveryFilter,
    filtered: impl Fn() -> webhook_deliveries::BoxedQuery<'a, diesel::pg::Pg>,
) -> QueryResult<i64> {
    if filter.created_since.is_some() {
        return filtered().count().get_result(&mut &*conn).await;
    }
    let mut query = webhook_delivery_totals::table
        .filter(webhook_delivery_totals::customer_id.eq(customer))
        .filter(webhook_delivery_totals::subscription_id.eq(subscription))
        .filter(webhook_delivery_totals::event_type.eq_any(known_event_types()))
        .select(diesel::dsl::sql::<diesel::sql_types::BigInt>(
            "coalesce(sum(total), 0)::bigint",
        ))
        .into_boxed();
    if let Some(status) = filter.status {
        query = query.filter(webhook_delivery_totals::status.eq(status.as_str()));
    }
    if let Some(event) = filter.event_type {
        query = query.filter(webhook_delivery_totals::event_type.eq(event.as_str()));
    }
    query.get_result(&mut &*conn).await
}

impl PgStore {
    pub(crate) async fn log_page(
        &self,
        scope: CustomerScope,
        subscription: WebhookId,
        filter: &DeliveryFilter,
        page: PageRequest,
    ) -> Result<Page<Delivery>> {
        let customer = scope.customer_id().as_uuid();
        let after = after_key(&page, |key| {
            let mut reader = posture_domain::page::KeyReader::new(key);
            let created = reader.time()?;
            let id = reader
                .text()?
                .parse::<Uuid>()
                .map_err(|_| SortKey::mismatch())?;
            reader.end()?;
            Ok((created, id))
        })?;
        let conn = self.conn().await?;
        let filtered = || {
            let mut query = webhook_deliveries::table
                .filter(webhook_deliveries::customer_id.eq(customer))
                .filter(webhook_deliveries::subscription_id.eq(subscription.as_uuid()))
                // A delivery of a type a newer build wrote (a rolling upgrade) is shown
                // once this instance knows its type.
                .filter(webhook_deliveries::event_type.eq_any(known_event_types()))
                .into_boxed();
            if let Some(status) = filter.status {
                query = query.filter(webhook_deliveries::status.eq(status.as_str()));
            }
            if let Some(event) = filter.event_type {
                query = query.filter(webhook_deliveries::event_type.eq(event.as_str()));
            }
            if let Some(since) = filter.created_since {
                query = query.filter(webhook_deliveries::created_at.ge(since));
            }
            query
        };
        let mut rows = filtered();
        if let Some((created, id)) = after {
            // A row comparison: one range of the log index, read from where the page starts.
            rows = rows.filter(
                diesel::dsl::sql::<diesel::sql_types::Bool>(
                    "(webhook_deliveries.created_at, webhook_deliveries.id) < (",
                )
                .bind::<Timestamptz, _>(created)
                .sql(", ")
                .bind::<SqlUuid, _>(id)
                .sql(")"),
            );
        }
        let rows = rows
            .order((
                webhook_deliveries::created_at.desc(),
                webhook_deliveries::id.desc(),
            ))
            .limit(page.fetch())
            .offset(i64::try_from(page.offset()).unwrap_or(i64::MAX))
            .select(DeliveryRow::as_select());
        // One round trip: the subscription's check, the total and the page are pipelined
        // (the page of a subscription that is not the customer's active one is read for
        // nothing, and the customer's rows only).
        let (active, total, rows) = futures_util::future::join3(
            active_subscription(&conn, customer, subscription.as_uuid()),
            count_log(&conn, customer, subscription.as_uuid(), filter, filtered),
            async { rows.load::<DeliveryRow>(&mut &*conn).await },
        )
        .await;
        active?;
        let (total, rows) = (total.map_err(db_error)?, rows.map_err(db_error)?);
        let rows = rows
            .into_iter()
            .map(Delivery::try_from)
            .collect::<Result<Vec<_>>>()?;
        Ok(page.page_of(rows, total.max(0) as u64, log_key))
    }

    pub(crate) async fn log_entry(
        &self,
        scope: CustomerScope,
        subscription: WebhookId,
        id: DeliveryId,
    ) -> Result<(Delivery, Vec<Attempt>)> {
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        active_subscription(&conn, customer, subscription.as_uuid()).await?;
        let row: DeliveryRow = webhook_deliveries::table
            .find((customer, id.as_uuid()))
            .filter(webhook_deliveries::subscription_id.eq(subscription.as_uuid()))
            .select(DeliveryRow::as_select())
            .first(&mut conn)
            .await
            .optional()
            .map_err(db_error)?
            .ok_or(Error::NotFound)?;
        let attempts = rows::load_attempts(&mut conn, scope, id)
            .await
            .map_err(db_error)?;
        Ok((row.try_into()?, attempts))
    }

    pub(crate) async fn requeue_window(
        &self,
        scope: CustomerScope,
        subscription: WebhookId,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<u64> {
        let customer = scope.customer_id().as_uuid();
        let subscription = subscription.as_uuid();
        let mut conn = self.conn().await?;
        conn.transaction(async |conn| {
            // The subscription's row lock serialises recoveries (and waits for a
            // deactivation in progress).
            let active: Option<bool> = webhook_subscriptions::table
                .find((customer, subscription))
                .select(webhook_subscriptions::active)
                .for_update()
                .first(conn)
                .await
                .optional()?;
            if active != Some(true) {
                return Ok(Err(Error::NotFound));
            }
            let running: i64 = webhook_deliveries::table
                .filter(webhook_deliveries::customer_id.eq(customer))
                .filter(webhook_deliveries::subscription_id.eq(subscription))
                .filter(webhook_deliveries::status.eq("pending"))
                .filter(webhook_deliveries::trigger.eq("recovery"))
                .count()
                .get_result(conn)
                .await?;
            if running > 0 {
                return Ok(Err(Error::Conflict(format!(
                    "a recovery is in progress: {running} of its deliveries are pending"
                ))));
            }
            // Due oldest first: the worker claims by due time.
            let requeued = diesel::sql_query(
                "WITH requeue AS ( \
                         SELECT id, row_number() OVER (ORDER BY created_at, id) AS n \
                         FROM webhook_deliveries \
                         WHERE customer_id = $1 AND subscription_id = $2 \
                           AND status IN ('failed', 'cancelled') AND trigger <> 'test' \
                           AND created_at >= $3 AND created_at < $4) \
                     UPDATE webhook_deliveries d SET status = 'pending', trigger = 'recovery', \
                            schedule_start = d.attempts, lease_until = NULL, leased_by = NULL, \
                            next_attempt_at = to_timestamp($5 + requeue.n / 1000.0) \
                     FROM requeue WHERE d.customer_id = $1 AND d.id = requeue.id",
            )
            .bind::<SqlUuid, _>(customer)
            .bind::<SqlUuid, _>(subscription)
            .bind::<Timestamptz, _>(since)
            .bind::<Timestamptz, _>(until)
            // Now, as seconds: Citus refuses a time zone dependent sum of a column in an
            // UPDATE, and to_timestamp of a number is none.
            .bind::<diesel::sql_types::Double, _>(now_seconds(self.clock.now()))
            .execute(conn)
            .await?;
            if requeued > 0 {
                crate::wake::notify_workers(conn).await?;
            }
            Ok::<_, diesel::result::Error>(Ok(requeued as u64))
        })
        .await
        .map_err(db_error)?
    }

    pub(crate) async fn insert_test(
        &self,
        scope: CustomerScope,
        delivery: &Delivery,
        body: &[u8],
        attempt: &Attempt,
    ) -> Result<()> {
        // Whatever the receiver sent is made storable first (a NUL would fail the insert).
        let attempt = &attempt.storable();
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        conn.transaction(async |conn| {
            let inserted = diesel::sql_query(
                "INSERT INTO webhook_deliveries (customer_id, id, subscription_id, event_type, chunk, \
                     finding_ids, body, status, trigger, attempts, next_attempt_at, created_at, \
                     delivered_at, last_attempt_at, last_status_code, last_error, changes) \
                 SELECT $1, $2, s.id, $4, 0, $10, $5, $6, 'test', 1, $7, $7, \
                        CASE WHEN $6 = 'delivered' THEN $7 END, $7, $8, $9, $11 \
                 FROM webhook_subscriptions s WHERE s.customer_id = $1 AND s.id = $3 AND s.active",
            )
            .bind::<SqlUuid, _>(customer)
            .bind::<SqlUuid, _>(delivery.id.as_uuid())
            .bind::<SqlUuid, _>(delivery.subscription_id.as_uuid())
            .bind::<Text, _>(delivery.event_type.as_str())
            .bind::<diesel::sql_types::Bytea, _>(body)
            .bind::<Text, _>(delivery.status.as_str())
            .bind::<Timestamptz, _>(attempt.started_at)
            .bind::<Nullable<SmallInt>, _>(attempt.status_code.map(|s| s as i16))
            .bind::<Nullable<Text>, _>(&attempt.error)
            .bind::<diesel::sql_types::Array<Text>, _>(
                delivery
                    .finding_ids
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>(),
            )
            .bind::<Nullable<diesel::sql_types::Jsonb>, _>(
                (!delivery.changes.is_empty())
                    .then(|| serde_json::to_value(&delivery.changes))
                    .transpose()
                    .map_err(|e| diesel::result::Error::SerializationError(Box::new(e)))?,
            )
            .execute(conn)
            .await?;
            if inserted == 0 {
                return Ok(Err(Error::NotFound));
            }
            diesel::sql_query(
                "INSERT INTO webhook_attempts (customer_id, delivery_id, attempt, started_at, \
                     latency_ms, status_code, error, response_excerpt, worker, detail) \
                 VALUES ($1, $2, 1, $3, $4, $5, $6, $7, 'posture-api test', $8)",
            )
            .bind::<SqlUuid, _>(customer)
            .bind::<SqlUuid, _>(delivery.id.as_uuid())
            .bind::<Timestamptz, _>(attempt.started_at)
            .bind::<Integer, _>(i32::try_from(attempt.latency_ms).unwrap_or(i32::MAX))
            .bind::<Nullable<SmallInt>, _>(attempt.status_code.map(|s| s as i16))
            .bind::<Nullable<Text>, _>(&attempt.error)
            .bind::<Nullable<Text>, _>(&attempt.response_excerpt)
            .bind::<Nullable<Text>, _>(&attempt.detail)
            .execute(conn)
            .await?;
            Ok::<_, diesel::result::Error>(Ok(()))
        })
        .await
        .map_err(db_error)?
    }
}

/// `at` as seconds since the Unix epoch (with its microseconds).
fn now_seconds(at: DateTime<Utc>) -> f64 {
    at.timestamp_micros() as f64 / 1_000_000.0
}
