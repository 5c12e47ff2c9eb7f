//! Webhook deliveries: the outbox rows the worker sends, the retry schedule and what an
//! attempt's outcome means.
//!
//! One analyzer pass queues one delivery per (subscription, event type, chunk of at most
//! [`CHUNK_SIZE`] new findings). A delivery is tried until a 2xx answer, with exponentially
//! growing, jittered delays honouring `Retry-After`, for about a day by default; then it is
//! failed. `410 Gone` deactivates the subscription.
//!
//! A consumer reads the log of its subscription's deliveries (kept for a bounded
//! [`DEFAULT_RETENTION_DAYS`]), redelivers one, recovers a window of failed ones after an
//! outage, and sends a test: each of these is a [`DeliveryTrigger`].

use std::time::Duration;

use chrono::{DateTime, Utc};

pub use crate::event_type::DeliveryEvent;
use crate::{
    ids::{CustomerId, DeliveryId, FindingId, PassId, WebhookId},
    secrets::SealedSecret,
    webhook::WebhookType,
};

/// Most findings in one delivery.
pub const CHUNK_SIZE: usize = 100;
/// The request timeout: a receiver must answer within it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most bytes of a receiver's answer kept with an attempt.
pub const RESPONSE_EXCERPT_BYTES: usize = 1024;

string_enum! {
    /// Where a delivery stands.
    pub enum DeliveryStatus ("status") {
        /// Not delivered yet; tried again at `nextAttemptAt`.
        Pending = "pending",
        /// A receiver answered 2xx.
        Delivered = "delivered",
        /// Every attempt failed, or the receiver answered 410 Gone.
        Failed = "failed",
        /// The subscription was deactivated before it was delivered.
        Cancelled = "cancelled",
    }
}

/// Test deliveries a subscription may send: 5 a minute (`POST /webhooks/{id}/test`).
pub const TEST_RATE: crate::rate_limit::RatePolicy = crate::rate_limit::RatePolicy {
    limit: 5,
    window_secs: 60,
};

/// Test deliveries all of a customer's subscriptions may send together: 20 a minute.
pub const TEST_CUSTOMER_RATE: crate::rate_limit::RatePolicy = crate::rate_limit::RatePolicy {
    limit: 20,
    window_secs: 60,
};

/// How long the delivery log keeps finished deliveries, by default.
pub const DEFAULT_RETENTION_DAYS: u32 = 30;

string_enum! {
    /// The field of a finding a lifecycle or triage event is about.
    pub enum ChangedField ("field") {
        Status = "status",
        Severity = "severity",
        /// The triage's `state` (a triage event).
        TriageState = "triageState",
    }
}

/// How a finding changed in the pass that queued a lifecycle event: `field` went from
/// `from` to `to` (wire strings of a status or severity).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FindingChange {
    pub field: ChangedField,
    pub from: String,
    pub to: String,
}

string_enum! {
    /// What started a delivery's current schedule.
    pub enum DeliveryTrigger ("trigger") {
        /// An analyzer pass found what the subscription listens to.
        Event = "event",
        /// `POST /webhooks/{id}/test`: sent once, at once, never retried.
        Test = "test",
        /// `POST .../deliveries/{deliveryId}/redeliver`: the same bytes again.
        Redelivery = "redelivery",
        /// `POST /webhooks/{id}/recover`: requeued with a window of failed deliveries.
        Recovery = "recovery",
    }
}

/// Which deliveries of a subscription a log page shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryFilter {
    pub status: Option<DeliveryStatus>,
    pub event_type: Option<DeliveryEvent>,
    /// Queued at or after this time.
    pub created_since: Option<DateTime<Utc>>,
}

/// When to try again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The delay after the first failed attempt; each later one is [`RetryPolicy::FACTOR`]
    /// times longer, up to [`RetryPolicy::MAX_DELAY`].
    pub base: Duration,
    /// Attempts before a delivery is failed.
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    /// 8 attempts over about 23 hours: 30 s, 2 min, 8 min, 32 min, 2.1 h, 8.5 h, 12 h.
    fn default() -> Self {
        Self {
            base: Duration::from_secs(30),
            max_attempts: 8,
        }
    }
}

impl RetryPolicy {
    pub const FACTOR: u32 = 4;
    pub const MAX_DELAY: Duration = Duration::from_secs(12 * 3600);
    /// Jitter: each delay is scaled by a factor in [0.8, 1.2).
    pub const JITTER: f64 = 0.2;

    /// The delay before the next attempt, after `attempts_made` attempts failed (1 for the
    /// first), or `None` when none is left. `jitter` is uniform in [0, 1); a receiver's
    /// `Retry-After` postpones the attempt (bounded by [`RetryPolicy::MAX_DELAY`]).
    pub fn next_delay(
        &self,
        attempts_made: u32,
        jitter: f64,
        retry_after: Option<Duration>,
    ) -> Option<Duration> {
        if attempts_made >= self.max_attempts {
            return None;
        }
        let exponent = attempts_made.saturating_sub(1).min(30);
        let nominal = self
            .base
            .saturating_mul(Self::FACTOR.saturating_pow(exponent))
            .min(Self::MAX_DELAY);
        let scale = 1.0 - Self::JITTER + 2.0 * Self::JITTER * jitter.clamp(0.0, 1.0);
        let jittered = nominal.mul_f64(scale).min(Self::MAX_DELAY);
        Some(match retry_after {
            Some(wanted) => jittered.max(wanted.min(Self::MAX_DELAY)),
            None => jittered,
        })
    }

    /// The nominal time from the first attempt to the last (without jitter).
    pub fn span(&self) -> Duration {
        (1..self.max_attempts)
            .filter_map(|n| self.next_delay(n, 0.5, None))
            .sum()
    }
}

/// What one attempt came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The receiver answered 2xx in time.
    Delivered { status: u16 },
    /// The receiver answered 410 Gone: the subscription is deactivated.
    Gone,
    /// Anything else: a non-2xx answer (redirects included: they are never followed), a
    /// timeout, a connection error or a refused address.
    Failed {
        status: Option<u16>,
        error: String,
        retry_after: Option<Duration>,
    },
}

impl Outcome {
    /// The outcome of an HTTP answer.
    pub fn of_status(status: u16, retry_after: Option<Duration>) -> Self {
        match status {
            200..=299 => Outcome::Delivered { status },
            410 => Outcome::Gone,
            300..=399 => Outcome::Failed {
                status: Some(status),
                error: format!("HTTP {status}: redirects are not followed; update the webhook URL"),
                retry_after,
            },
            _ => Outcome::Failed {
                status: Some(status),
                error: format!("HTTP {status}"),
                retry_after,
            },
        }
    }
}

/// A delivery as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub id: DeliveryId,
    pub customer_id: CustomerId,
    pub subscription_id: WebhookId,
    /// The analyzer pass that queued it (none for a test).
    pub pass_id: Option<PassId>,
    pub event_type: DeliveryEvent,
    pub chunk: u32,
    pub finding_ids: Vec<FindingId>,
    /// For a lifecycle event: how each finding changed, in the order of `finding_ids`
    /// (empty otherwise).
    pub changes: Vec<FindingChange>,
    /// The events it announces, in the order of `finding_ids` (empty for a test, and for a
    /// delivery queued before the events feed existed).
    pub event_ids: Vec<crate::ids::EventId>,
    pub status: DeliveryStatus,
    pub trigger: DeliveryTrigger,
    /// Every attempt made, over every schedule.
    pub attempts: u32,
    /// Attempts made before the current schedule began (a redelivery or a recovery starts
    /// a fresh one).
    pub schedule_start: u32,
    pub next_attempt_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub last_attempt_at: Option<DateTime<Utc>>,
    pub last_status_code: Option<u16>,
    pub last_error: Option<String>,
}

impl Delivery {
    /// A delivery queued `now` and due at once, not yet attempted: of `event` to
    /// `subscription` of `customer`, carrying `finding_ids` (chunk 0, no pass).
    pub fn pending(
        (customer_id, subscription_id): (CustomerId, WebhookId),
        event_type: DeliveryEvent,
        trigger: DeliveryTrigger,
        finding_ids: Vec<FindingId>,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            id: DeliveryId::generate(),
            customer_id,
            subscription_id,
            pass_id: None,
            event_type,
            chunk: 0,
            finding_ids,
            changes: Vec::new(),
            event_ids: Vec::new(),
            status: DeliveryStatus::Pending,
            trigger,
            attempts: 0,
            schedule_start: 0,
            next_attempt_at: now,
            created_at: now,
            delivered_at: None,
            last_attempt_at: None,
            last_status_code: None,
            last_error: None,
        }
    }

    /// Attempts made in the current schedule (what the retry policy counts).
    pub fn attempts_in_schedule(&self) -> u32 {
        self.attempts.saturating_sub(self.schedule_start)
    }

    /// When it will be attempted next: only a pending delivery has a next attempt (a
    /// delivered, failed or cancelled one keeps the column's last value, which means
    /// nothing).
    pub fn next_attempt(&self) -> Option<DateTime<Utc>> {
        (self.status == DeliveryStatus::Pending).then_some(self.next_attempt_at)
    }
}

/// Where and how a claimed delivery is sent.
#[derive(Clone, Debug)]
pub struct DeliveryTarget {
    pub url: String,
    pub webhook_type: WebhookType,
    pub secret: SealedSecret,
    /// The secret a rotation replaced, while it still signs.
    pub previous_secret: Option<SealedSecret>,
}

/// A delivery a worker holds the lease of.
#[derive(Clone, Debug)]
pub struct ClaimedDelivery {
    pub delivery: Delivery,
    pub target: DeliveryTarget,
    /// The body it carries: a test's, or one rendered before bodies were shared (every
    /// retry sends the same bytes).
    pub body: Option<Vec<u8>>,
    /// The findings its chunk carries, as the chunk's first attempt read them, shared by
    /// every subscription's delivery of the chunk (JSON as the API shows findings): `None`
    /// until that attempt.
    pub snapshot: Option<Vec<u8>>,
}

/// One attempt, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// 1 for the first attempt.
    pub number: u32,
    pub started_at: DateTime<Utc>,
    pub latency_ms: u32,
    pub status_code: Option<u16>,
    /// What went wrong, as the customer is told it (the delivery log): the receiver's status,
    /// or a coarse outcome (unreachable, no answer in time), never the network's own words,
    /// which would map what lies behind a receiver's address.
    pub error: Option<String>,
    /// At most [`RESPONSE_EXCERPT_BYTES`] of the answer (kept for operators only).
    pub response_excerpt: Option<String>,
    /// What the network said (connection refused, a TLS error, a name that does not
    /// resolve), for operators only (`posture-api deliveries show`, the worker's log).
    pub detail: Option<String>,
}

/// Longest `error` or `detail` of an attempt kept, in bytes.
pub const ATTEMPT_TEXT_BYTES: usize = 512;

impl Attempt {
    /// The attempt as it may be stored and logged: whatever came from outside (the error,
    /// its detail, the receiver's answer) without NUL or other control characters, within
    /// its bound. Idempotent; adapters store only this.
    #[must_use]
    pub fn storable(&self) -> Attempt {
        let line = |text: &Option<String>| {
            text.as_deref()
                .map(|t| crate::outside::one_line(t, ATTEMPT_TEXT_BYTES))
        };
        Attempt {
            error: line(&self.error),
            detail: line(&self.detail),
            response_excerpt: self
                .response_excerpt
                .as_deref()
                .map(|t| crate::outside::excerpt(t, RESPONSE_EXCERPT_BYTES)),
            ..self.clone()
        }
    }
}

/// How many deliveries wait.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueDepth {
    /// Pending deliveries, due now or later.
    pub pending: u64,
    /// Pending deliveries due now.
    pub due: u64,
    /// How long the longest-waiting due delivery has been due, in seconds (0 when none is).
    pub oldest_due_secs: u64,
}

/// What happens to a delivery after an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextStep {
    Delivered,
    RetryAt(DateTime<Utc>),
    Failed,
    /// 410 Gone: failed, and the subscription is deactivated (its other pending deliveries
    /// are cancelled).
    Gone,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_schedule_spans_about_a_day_over_eight_attempts() {
        let policy = RetryPolicy::default();
        let delays: Vec<u64> = (1..8)
            .map(|n| policy.next_delay(n, 0.5, None).unwrap().as_secs())
            .collect();
        assert_eq!(delays, vec![30, 120, 480, 1920, 7680, 30720, 43200]);
        assert_eq!(
            policy.next_delay(8, 0.5, None),
            None,
            "eight attempts, then failed"
        );
        let hours = policy.span().as_secs_f64() / 3600.0;
        assert!((20.0..=26.0).contains(&hours), "{hours} h");
    }

    #[test]
    fn jitter_spreads_delays_by_twenty_percent() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.next_delay(1, 0.0, None).unwrap(),
            Duration::from_secs(24)
        );
        assert!(policy.next_delay(1, 0.999, None).unwrap() < Duration::from_secs(36));
    }

    #[test]
    fn retry_after_postpones_but_is_bounded() {
        let policy = RetryPolicy::default();
        let wanted = Duration::from_secs(600);
        assert_eq!(policy.next_delay(1, 0.5, Some(wanted)).unwrap(), wanted);
        assert_eq!(
            policy
                .next_delay(1, 0.5, Some(Duration::from_secs(1)))
                .unwrap(),
            Duration::from_secs(30)
        );
        assert_eq!(
            policy
                .next_delay(1, 0.5, Some(Duration::from_secs(10 * 86_400)))
                .unwrap(),
            RetryPolicy::MAX_DELAY
        );
    }

    #[test]
    fn answers_are_classified() {
        assert_eq!(
            Outcome::of_status(204, None),
            Outcome::Delivered { status: 204 }
        );
        assert_eq!(Outcome::of_status(410, None), Outcome::Gone);
        assert!(matches!(
            Outcome::of_status(302, None),
            Outcome::Failed {
                status: Some(302),
                ..
            }
        ));
        assert!(matches!(
            Outcome::of_status(500, None),
            Outcome::Failed {
                status: Some(500),
                ..
            }
        ));
        assert!(matches!(
            Outcome::of_status(429, Some(Duration::from_secs(5))),
            Outcome::Failed {
                retry_after: Some(_),
                ..
            }
        ));
    }
}
