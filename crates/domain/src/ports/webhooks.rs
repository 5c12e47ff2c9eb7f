//! The ports of webhooks: subscriptions and their secrets, the outbox of deliveries the
//! workers send and consumers read, and sending a test delivery at once.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::{
    customer::CustomerScope,
    delivery::{
        Attempt, ClaimedDelivery, Delivery, DeliveryFilter, DeliveryStatus, DeliveryTarget,
        NextStep, Outcome, QueueDepth,
    },
    error::Result,
    finding::Finding,
    ids::{CustomerId, DeliveryId, WebhookId},
    page::{Page, PageRequest},
    secrets::SealedSecret,
    webhook::{NewSubscription, Subscription},
    webhook_change::SubscriptionPatch,
};

/// Webhook subscriptions. Reads see active subscriptions only: a deactivated one is kept
/// (for audit) but is `NotFound` like a missing one.
#[async_trait]
pub trait WebhookRepository: Send + Sync {
    /// Stores an active subscription with its sealed secret. `Conflict` when the customer
    /// already has `max_active` active subscriptions (checked atomically).
    async fn create_subscription(
        &self,
        scope: CustomerScope,
        id: WebhookId,
        subscription: &NewSubscription,
        secret: &SealedSecret,
        max_active: u32,
    ) -> Result<Subscription>;
    /// Active subscriptions, oldest first.
    async fn list_subscriptions(
        &self,
        scope: CustomerScope,
        page: PageRequest,
    ) -> Result<Page<Subscription>>;
    async fn get_subscription(&self, scope: CustomerScope, id: WebhookId) -> Result<Subscription>;
    /// Deactivates (soft-deletes) an active subscription and cancels its pending deliveries.
    async fn deactivate_subscription(
        &self,
        scope: CustomerScope,
        id: WebhookId,
    ) -> Result<Subscription>;
    /// The sealed signing secrets of an active subscription: the current one, and the
    /// previous one while a rotation's overlap lasts.
    async fn sealed_secrets(
        &self,
        scope: CustomerScope,
        id: WebhookId,
    ) -> Result<SubscriptionSecrets>;
    /// Applies a validated patch to an active subscription. `expected`: the versions the
    /// caller accepts (`If-Match`); `PreconditionFailed` when the current one is not among
    /// them. Pausing holds
    /// new deliveries; resuming (or re-enabling a disabled subscription) releases them.
    async fn update_subscription(
        &self,
        scope: CustomerScope,
        id: WebhookId,
        patch: &SubscriptionPatch,
        expected: Option<&[u32]>,
    ) -> Result<Subscription>;
    /// Replaces the signing secret with `secret`; the replaced one keeps signing until
    /// `previous_expires_at` (`None`: it is dropped now). `Conflict` while an earlier
    /// rotation's overlap lasts, unless `force`; `PreconditionFailed` as for updates.
    async fn rotate_secret(
        &self,
        scope: CustomerScope,
        id: WebhookId,
        secret: &SealedSecret,
        previous_expires_at: Option<DateTime<Utc>>,
        force: bool,
        expected: Option<&[u32]>,
    ) -> Result<Subscription>;
}

/// A subscription's sealed signing secrets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriptionSecrets {
    pub current: SealedSecret,
    /// The secret a rotation replaced, while it still signs.
    pub previous: Option<SealedSecret>,
}

/// A subscription's sealed signing secret, with the row it belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredSecret {
    pub customer: CustomerId,
    pub subscription: WebhookId,
    /// The secret a rotation replaced (still signing), not the current one.
    pub previous: bool,
    pub sealed: SealedSecret,
}

/// Moving signing secrets to a new `POSTURE_SECRET_KEY` (operator command, every customer).
#[async_trait]
pub trait SecretRotationRepository: Send + Sync {
    /// Up to `limit` secrets of subscriptions (active or not) sealed with another key than
    /// `current_key_id`, in (customer, subscription) order after `after`: the current ones,
    /// or with `previous` those a rotation replaced.
    async fn secrets_sealed_with_other_keys(
        &self,
        current_key_id: &str,
        previous: bool,
        after: Option<(CustomerId, WebhookId)>,
        limit: u32,
    ) -> Result<Vec<StoredSecret>>;
    /// Stores `resealed` in place of `previous`, only if the row still holds `previous`
    /// (compare-and-swap); `false` when it changed meanwhile.
    async fn replace_sealed_secret(
        &self,
        previous: &StoredSecret,
        resealed: &SealedSecret,
    ) -> Result<bool>;
}

/// The outbox of webhook deliveries, worked by any number of workers.
#[async_trait]
pub trait DeliveryRepository: Send + Sync {
    /// Claims up to `claim.limit` due deliveries of active subscriptions of the claim's
    /// lane for its lease, within the bounds of fair shares (`crate::fair_share`): no
    /// other worker claims them until the lease ends (a crashed worker's claims are
    /// retried then).
    async fn claim_due(
        &self,
        claim: &crate::fair_share::ClaimRequest<'_>,
    ) -> Result<Vec<ClaimedDelivery>>;
    /// Keeps `snapshot`, the findings of `delivery`'s chunk as its first attempt read them,
    /// for every delivery of the chunk; returns the snapshot kept (the first one kept wins:
    /// two workers starting the chunk at once both send the same).
    async fn keep_snapshot(&self, delivery: &Delivery, snapshot: &[u8]) -> Result<Vec<u8>>;
    /// Deletes at most `batch` kept snapshots of chunks queued before `cutoff` of which no
    /// delivery is left (the retention sweep deleted them all); returns how many.
    async fn purge_snapshots(&self, cutoff: DateTime<Utc>, batch: u32) -> Result<u64>;
    /// Records an attempt and what follows it, and the attempt's latency in its
    /// subscription's moving average; ends the lease.
    async fn finish_attempt(
        &self,
        worker: &str,
        delivery: &Delivery,
        attempt: &Attempt,
        next: NextStep,
    ) -> Result<()>;
    /// How many deliveries wait (for metrics).
    async fn queue_depth(&self) -> Result<QueueDepth>;
    /// Waits until new deliveries are queued or `timeout` passes; `true` if woken. A wait
    /// that had to start listening first (the first, or one after the connection broke)
    /// answers `true` at once: what was queued before it listened sent it no word, so the
    /// caller claims once more.
    async fn wait_for_work(&self, timeout: std::time::Duration) -> Result<bool>;
    /// Deliveries of a customer (of one subscription, active or not, when given), newest
    /// first (operators).
    async fn list_deliveries(
        &self,
        scope: CustomerScope,
        subscription: Option<WebhookId>,
        status: Option<DeliveryStatus>,
        limit: u32,
    ) -> Result<Vec<Delivery>>;
    /// Makes a failed or cancelled delivery pending again, due now (operators).
    async fn retry_delivery(&self, id: DeliveryId) -> Result<Delivery>;
    /// A delivery of the customer, whatever its subscription's state (operators).
    async fn delivery(&self, scope: CustomerScope, id: DeliveryId) -> Result<Delivery>;
    /// The attempts of a delivery, oldest first.
    async fn attempts(&self, scope: CustomerScope, id: DeliveryId) -> Result<Vec<Attempt>>;
    /// The log of an active subscription's deliveries, newest first (then by id, descending).
    /// `NotFound` when the subscription is not an active one of the customer.
    async fn subscription_deliveries(
        &self,
        scope: CustomerScope,
        subscription: WebhookId,
        filter: &DeliveryFilter,
        page: PageRequest,
    ) -> Result<Page<Delivery>>;
    /// One delivery of an active subscription and its attempts, oldest first.
    async fn subscription_delivery(
        &self,
        scope: CustomerScope,
        subscription: WebhookId,
        id: DeliveryId,
    ) -> Result<(Delivery, Vec<Attempt>)>;
    /// Sends a delivery that is not pending again (the same bytes, the same id): pending,
    /// due now, on a fresh schedule. `Conflict` while it is pending.
    async fn redeliver(
        &self,
        scope: CustomerScope,
        subscription: WebhookId,
        id: DeliveryId,
    ) -> Result<Delivery>;
    /// Requeues the subscription's failed and cancelled deliveries (tests aside) queued in
    /// `[since, until)`, due oldest first, each on a fresh schedule; returns how many.
    /// `Conflict` while deliveries of an earlier recovery are pending.
    async fn recover(
        &self,
        scope: CustomerScope,
        subscription: WebhookId,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<u64>;
    /// Records a test delivery sent at once (finished, never retried) with its attempt, for
    /// an active subscription (`NotFound` otherwise).
    async fn record_test(
        &self,
        scope: CustomerScope,
        delivery: &Delivery,
        body: &[u8],
        attempt: &Attempt,
    ) -> Result<()>;
    /// Deletes up to `batch` finished deliveries queued before `cutoff`, with their
    /// attempts (the log's retention); returns how many.
    async fn purge_finished(&self, cutoff: DateTime<Utc>, batch: u32) -> Result<u64>;
    /// Disables the active subscriptions whose every attempt since `failing_before` failed
    /// (`disabledReason: failing`) and cancels their pending deliveries; returns them.
    async fn disable_failing(
        &self,
        failing_before: DateTime<Utc>,
    ) -> Result<Vec<(CustomerId, WebhookId)>>;
    /// Cancels the deliveries paused subscriptions have held since before `held_before`,
    /// and forgets the previous secrets whose overlap ended; returns both counts.
    async fn expire_holds_and_secrets(&self, held_before: DateTime<Utc>) -> Result<(u64, u64)>;
}

/// What sending a delivery at once came to: the body sent (signed), and the attempt.
#[derive(Clone, Debug)]
pub struct SentNow {
    pub body: Vec<u8>,
    pub outcome: Outcome,
    pub attempt: Attempt,
}

/// Sends one delivery at once, outside the outbox and without retries (test deliveries),
/// under the same egress rules, timeout and signatures as the worker's.
#[async_trait]
pub trait DirectSender: Send + Sync {
    /// Renders `findings` for the target's type, signs and sends. `Err` only when the
    /// delivery cannot be prepared (its secret does not open); a refusing receiver is an
    /// `Ok` with a failed outcome.
    async fn send_now(
        &self,
        delivery: &Delivery,
        target: &DeliveryTarget,
        findings: Vec<Finding>,
    ) -> Result<SentNow>;
}
