//! The delivery log of a webhook subscription, and what a consumer does with it: redeliver,
//! recover a window, send a test.

use chrono::{DateTime, Utc};
use posture_domain::delivery::{
    Attempt, Delivery, DeliveryEvent, DeliveryFilter, DeliveryStatus, DeliveryTrigger,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{paging::Timestamp, query::OneOf};

/// One delivery of a subscription, as its log shows it.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryResponse {
    /// Also sent as `X-Service-Delivery` and `webhook-id`: the same on every attempt and
    /// redelivery, so a receiver can deduplicate.
    #[schemars(schema_with = "crate::uuid")]
    pub id: String,
    #[schemars(schema_with = "crate::closed_set::<DeliveryEvent>")]
    pub event_type: DeliveryEvent,
    #[schemars(schema_with = "crate::closed_set::<DeliveryStatus>")]
    pub status: DeliveryStatus,
    /// What started its current schedule: `event` (an analyzer pass), `test`, `redelivery`
    /// or `recovery`.
    #[schemars(schema_with = "crate::closed_set::<DeliveryTrigger>")]
    pub trigger: DeliveryTrigger,
    /// Findings in the body (0 for a `ping`).
    pub finding_count: u32,
    /// Attempts made, over every schedule.
    pub attempts: u32,
    /// When it was queued.
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::option::serialize")]
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// When it is tried next; `null` unless it is pending.
    #[serde(serialize_with = "crate::time::option::serialize")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The receiver's HTTP status at the last attempt; `null` when it did not answer (or
    /// before the first attempt).
    pub last_status_code: Option<u16>,
    /// Why the last attempt failed; `null` after a success.
    pub last_error: Option<String>,
}

impl From<Delivery> for DeliveryResponse {
    fn from(d: Delivery) -> Self {
        Self {
            id: d.id.to_string(),
            event_type: d.event_type,
            status: d.status,
            trigger: d.trigger,
            finding_count: u32::try_from(d.finding_ids.len()).unwrap_or(u32::MAX),
            attempts: d.attempts,
            created_at: d.created_at,
            last_attempt_at: d.last_attempt_at,
            next_attempt_at: d.next_attempt(),
            last_status_code: d.last_status_code,
            last_error: d.last_error,
        }
    }
}

/// One attempt of a delivery. The receiver's answer body is never shown.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttemptResponse {
    /// When the attempt started.
    #[serde(serialize_with = "crate::time::serialize")]
    pub at: DateTime<Utc>,
    /// The receiver's HTTP status; `null` when it did not answer (timeout, refused
    /// connection, address refused by the egress rules).
    pub status_code: Option<u16>,
    pub latency_ms: u32,
    /// Why the attempt failed; `null` when it succeeded.
    pub error: Option<String>,
}

impl From<Attempt> for AttemptResponse {
    fn from(a: Attempt) -> Self {
        Self {
            at: a.started_at,
            status_code: a.status_code,
            latency_ms: a.latency_ms,
            error: a.error,
        }
    }
}

/// A delivery with its attempts, oldest first.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryDetailResponse {
    #[serde(flatten)]
    pub delivery: DeliveryResponse,
    /// The ids of the findings in the body, in order.
    pub finding_ids: Vec<String>,
    pub attempt_log: Vec<AttemptResponse>,
}

impl DeliveryDetailResponse {
    pub fn new(delivery: Delivery, attempts: Vec<Attempt>) -> Self {
        let finding_ids = delivery.finding_ids.iter().map(|f| f.to_string()).collect();
        Self {
            delivery: delivery.into(),
            finding_ids,
            attempt_log: attempts.into_iter().map(AttemptResponse::from).collect(),
        }
    }
}

/// The filters of a subscription's delivery log.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveriesQuery {
    /// Only deliveries in this state.
    pub status: Option<OneOf<DeliveryStatus>>,
    /// Only deliveries of this event type.
    pub event_type: Option<OneOf<DeliveryEvent>>,
    /// Only deliveries queued at or after this RFC 3339 time.
    pub created_since: Option<Timestamp>,
}

impl DeliveriesQuery {
    pub fn filter(&self) -> DeliveryFilter {
        DeliveryFilter {
            status: self.status.map(|s| s.0),
            event_type: self.event_type.map(|e| e.0),
            created_since: self.created_since.map(|t| t.0),
        }
    }
}

/// The body of `POST /webhooks/{id}/recover`: the window of deliveries to send again.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecoverRequest {
    /// Requeue failed and cancelled deliveries queued at or after this time (within the
    /// log's retention).
    #[schemars(example = &"2026-11-19T08:30:00Z")]
    pub since: DateTime<Utc>,
    /// ... and before this time (default: now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"2026-11-20T08:30:00Z")]
    pub until: Option<DateTime<Utc>>,
}

/// How many deliveries a recovery requeued.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecoverResponse {
    pub requeued: u64,
}

/// The body of `POST /webhooks/{id}/test`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TestDeliveryRequest {
    /// Send a sample of this event type (one sample finding, marked `"test": true`) instead
    /// of a `ping`. It need not be one the subscription listens to. Absent or `null`: a
    /// `ping`.
    #[schemars(schema_with = "crate::nullable_closed_set::<DeliveryEvent>")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
}

/// What came of a test delivery (sent once, at once, never retried).
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TestDeliveryResponse {
    /// The test's id in the delivery log (`trigger: "test"`).
    #[schemars(schema_with = "crate::uuid")]
    pub delivery_id: String,
    /// Whether the receiver answered 2xx.
    pub delivered: bool,
    /// The receiver's HTTP status; `null` when it did not answer.
    pub status_code: Option<u16>,
    pub latency_ms: u32,
    /// Why it failed; `null` when delivered.
    pub error: Option<String>,
}
