//! The rows of the outbox as Diesel reads them, and their domain values.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use posture_domain::{
    CustomerId, DeliveryId, Error, EventId, PassId, Result, WebhookId,
    delivery::{Attempt, Delivery},
};
use uuid::Uuid;

use crate::{
    error::corrupt,
    schema::{webhook_attempts, webhook_deliveries},
};

/// The columns of [`DeliveryRow`], of the table aliased `d`, for raw statements.
pub(crate) const DELIVERY_COLUMNS: &str = "d.customer_id, d.id, d.subscription_id, d.pass_id, \
     d.event_type, d.chunk, d.finding_ids, d.status, d.trigger, d.attempts, d.schedule_start, \
     d.next_attempt_at, d.created_at, d.delivered_at, d.last_attempt_at, d.last_status_code, \
     d.last_error, d.changes, d.event_ids";

#[derive(QueryableByName, Queryable, Selectable)]
#[diesel(table_name = webhook_deliveries, check_for_backend(diesel::pg::Pg))]
pub(crate) struct DeliveryRow {
    customer_id: Uuid,
    id: Uuid,
    subscription_id: Uuid,
    pass_id: Option<Uuid>,
    event_type: String,
    chunk: i32,
    finding_ids: Vec<String>,
    status: String,
    trigger: String,
    attempts: i32,
    schedule_start: i32,
    next_attempt_at: DateTime<Utc>,
    created_at: DateTime<Utc>,
    delivered_at: Option<DateTime<Utc>>,
    last_attempt_at: Option<DateTime<Utc>>,
    last_status_code: Option<i16>,
    last_error: Option<String>,
    changes: Option<serde_json::Value>,
    event_ids: Option<Vec<Uuid>>,
}

impl DeliveryRow {
    /// The order claims hand deliveries on: oldest due first, a pass's chunks in order, then
    /// the subscriptions in the order they were made (ids that sort by time).
    pub(crate) fn claim_order(&self) -> (DateTime<Utc>, i32, Uuid) {
        (self.next_attempt_at, self.chunk, self.subscription_id)
    }
}

impl TryFrom<DeliveryRow> for Delivery {
    type Error = Error;

    fn try_from(row: DeliveryRow) -> Result<Self> {
        Ok(Delivery {
            id: DeliveryId::from_uuid(row.id),
            customer_id: CustomerId::from_uuid(row.customer_id),
            subscription_id: WebhookId::from_uuid(row.subscription_id),
            pass_id: row.pass_id.map(PassId::from_uuid),
            event_type: row
                .event_type
                .parse()
                .map_err(|e| corrupt("event type", e))?,
            chunk: row.chunk.max(0) as u32,
            finding_ids: row
                .finding_ids
                .iter()
                .map(|id| id.parse().map_err(|e| corrupt("finding id", e)))
                .collect::<Result<_>>()?,
            changes: match row.changes {
                None => Vec::new(),
                Some(changes) => {
                    serde_json::from_value(changes).map_err(|e| corrupt("finding changes", e))?
                }
            },
            event_ids: row
                .event_ids
                .unwrap_or_default()
                .into_iter()
                .map(EventId::from_uuid)
                .collect(),
            status: row
                .status
                .parse()
                .map_err(|e| corrupt("delivery status", e))?,
            trigger: row
                .trigger
                .parse()
                .map_err(|e| corrupt("delivery trigger", e))?,
            attempts: row.attempts.max(0) as u32,
            schedule_start: row.schedule_start.max(0) as u32,
            next_attempt_at: row.next_attempt_at,
            created_at: row.created_at,
            delivered_at: row.delivered_at,
            last_attempt_at: row.last_attempt_at,
            last_status_code: row.last_status_code.map(|s| s as u16),
            last_error: row.last_error,
        })
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = webhook_attempts, check_for_backend(diesel::pg::Pg))]
struct AttemptRow {
    attempt: i32,
    started_at: DateTime<Utc>,
    latency_ms: i32,
    status_code: Option<i16>,
    error: Option<String>,
    response_excerpt: Option<String>,
    detail: Option<String>,
}

impl From<AttemptRow> for Attempt {
    fn from(r: AttemptRow) -> Self {
        Attempt {
            number: r.attempt.max(0) as u32,
            started_at: r.started_at,
            latency_ms: r.latency_ms.max(0) as u32,
            status_code: r.status_code.map(|s| s as u16),
            error: r.error,
            response_excerpt: r.response_excerpt,
            detail: r.detail,
        }
    }
}

/// The attempts of a delivery of the customer, oldest first.
pub(super) async fn load_attempts(
    conn: &mut diesel_async::AsyncPgConnection,
    scope: posture_domain::CustomerScope,
    id: DeliveryId,
) -> QueryResult<Vec<Attempt>> {
    let query = webhook_attempts::table
        .filter(webhook_attempts::customer_id.eq(scope.customer_id().as_uuid()))
        .filter(webhook_attempts::delivery_id.eq(id.as_uuid()))
        .order(webhook_attempts::attempt)
        .select(AttemptRow::as_select());
    let rows: Vec<AttemptRow> = diesel_async::RunQueryDsl::load(query, conn).await?;
    Ok(rows.into_iter().map(Attempt::from).collect())
}
