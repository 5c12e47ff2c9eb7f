//! A worker and the sending of one claimed delivery: its body (rendered from its chunk's
//! kept findings), its signatures, the attempt, and what follows it.

use std::{sync::Arc, time::Duration};

use posture_domain::{
    CustomerScope, Error, Result,
    delivery::{
        Attempt, ClaimedDelivery, Delivery, DeliveryTarget, NextStep, Outcome, RetryPolicy,
    },
    fair_share::FairShare,
    ports::{
        AuditRepository, DeliveryRepository, EventRepository, FindingRepository,
        IdempotencyRepository, PassStatistics, UsageRepository,
    },
    secrets::Keyring,
};
use ring::rand::{SecureRandom, SystemRandom};

use crate::{
    client::WebhookClient,
    render,
    secrets::{Secrets, open_secrets},
};

/// How a worker runs.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Names the worker's claims (host, process, random part).
    pub id: String,
    /// Deliveries sent at once to receivers that answer promptly (the prompt lane).
    pub concurrency: usize,
    /// Deliveries sent at once to receivers recognised slow (the slow lane).
    pub slow_concurrency: usize,
    /// The bounds every worker applies together: deliveries in flight per subscription,
    /// and the latency from which a subscription is served on the slow lane.
    pub share: FairShare,
    /// How long a claim lasts; must exceed the request timeout.
    pub lease: Duration,
    /// Longest sleep without a notification.
    pub poll_interval: Duration,
    pub retry: RetryPolicy,
    pub timeout: Duration,
    pub allow_private: bool,
    /// How long the delivery log keeps finished deliveries.
    pub retention: chrono::Duration,
    /// How long every attempt of a subscription may fail before it is disabled.
    pub disable_after: chrono::Duration,
    /// What time it is: an attempt's start, the signatures' timestamps, `Retry-After`
    /// dates, the sweeps' cut-offs.
    pub clock: Arc<dyn posture_domain::clock::Clock>,
}

/// A delivery worker.
pub struct Worker {
    pub(super) deliveries: Arc<dyn DeliveryRepository>,
    pub(super) findings: Arc<dyn FindingRepository>,
    pub(super) keyring: Arc<Keyring>,
    pub(super) client: WebhookClient,
    pub(super) config: WorkerConfig,
    pub(super) random: SystemRandom,
    /// Where the ingest gauges come from (`None`: not exported).
    pub(super) passes: Option<Arc<dyn PassStatistics>>,
    /// The events feed and how long it keeps events (`None`: not swept by this worker).
    pub(super) events: Option<(Arc<dyn EventRepository>, chrono::Duration)>,
    /// When the queue and ingest gauges were last refreshed.
    pub(super) gauges_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// When the delivery log was last swept.
    pub(super) swept_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// Where idempotency keys are kept (`None`: not swept by this worker).
    pub(super) idempotency: Option<Arc<dyn IdempotencyRepository>>,
    /// The customers' audit log and how long it keeps lines (`None`: not swept by this
    /// worker).
    pub(super) audit: Option<(Arc<dyn AuditRepository>, chrono::Duration)>,
    /// When triage marks past their expiry were last recorded.
    pub(super) triage_swept_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// Where the customers' storage usage is measured, and how often (`None`: no usage
    /// gauges).
    pub(super) usage: Option<(Arc<dyn UsageRepository>, std::time::Duration)>,
}

/// An error with its causes, one line.
pub(super) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}

/// Why a claimed delivery could not be prepared for sending.
enum Unprepared {
    /// The delivery itself cannot be sent (its secret does not open, its findings do not
    /// render): a failed attempt, with this reason.
    Unsendable(String),
    /// The database cannot be reached right now: the lease ends and the delivery is claimed
    /// again, no attempt counted.
    Unavailable(Error),
}

/// What happened to one claimed delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    Delivered,
    Retrying,
    Failed,
    Gone,
}

impl Worker {
    pub fn new(
        deliveries: Arc<dyn DeliveryRepository>,
        findings: Arc<dyn FindingRepository>,
        keyring: Arc<Keyring>,
        config: WorkerConfig,
    ) -> std::result::Result<Self, reqwest::Error> {
        let client =
            WebhookClient::new(config.timeout, config.allow_private, config.clock.clone())?;
        Ok(Self {
            deliveries,
            findings,
            keyring,
            client,
            config,
            random: SystemRandom::new(),
            passes: None,
            events: None,
            gauges_at: std::sync::Mutex::default(),
            swept_at: std::sync::Mutex::default(),
            triage_swept_at: std::sync::Mutex::default(),
            idempotency: None,
            audit: None,
            usage: None,
        })
    }

    /// Exports the ingest gauges too (`posture_ingest_*`: the passes of every customer in
    /// the last hour), read from `passes` with the queue's.
    #[must_use]
    /// Sweeps the events feed too: events older than `retention` are deleted.
    pub fn with_events(
        mut self,
        events: Arc<dyn EventRepository>,
        retention: chrono::Duration,
    ) -> Self {
        self.events = Some((events, retention));
        self
    }

    /// Deletes the audit log's lines older than `retention` at each sweep.
    pub fn with_audit(
        mut self,
        audit: Arc<dyn AuditRepository>,
        retention: chrono::Duration,
    ) -> Self {
        self.audit = Some((audit, retention));
        self
    }

    /// Forgets idempotency keys past their 24 hours at each sweep.
    pub fn with_idempotency_keys(mut self, keys: Arc<dyn IdempotencyRepository>) -> Self {
        self.idempotency = Some(keys);
        self
    }

    /// Exports the usage gauges too (`posture_customer_usage_*`: how the customers' stored
    /// bytes spread), measured by `usage` every `every` (unless another worker is measuring
    /// at that moment).
    pub fn with_usage(
        mut self,
        usage: Arc<dyn UsageRepository>,
        every: std::time::Duration,
    ) -> Self {
        self.usage = Some((usage, every));
        self
    }

    pub fn with_pass_statistics(mut self, passes: Arc<dyn PassStatistics>) -> Self {
        self.passes = Some(passes);
        self
    }

    fn jitter(&self) -> f64 {
        let mut bytes = [0u8; 4];
        match self.random.fill(&mut bytes) {
            Ok(()) => f64::from(u32::from_be_bytes(bytes)) / (f64::from(u32::MAX) + 1.0),
            Err(_) => 0.5,
        }
    }

    /// The body of a delivery and its signing secret. The body is the one it carries (a
    /// test, or one rendered before bodies were shared), or rendered from its chunk's
    /// snapshot: the one kept, or, at the chunk's first attempt, the findings read now and
    /// kept for every subscription (another worker's, when it kept one first).
    async fn prepare(
        &self,
        delivery: &Delivery,
        target: &DeliveryTarget,
        (body, snapshot): (Option<Vec<u8>>, Option<Vec<u8>>),
    ) -> std::result::Result<(Vec<u8>, Secrets), Unprepared> {
        let unprepared = |what: &str, e: Error| match e {
            Error::Unavailable(_) => Unprepared::Unavailable(e),
            other => Unprepared::Unsendable(format!("{what}: {}", error_chain(&other))),
        };
        let body = match (body, snapshot) {
            (Some(body), _) => body,
            (None, snapshot) => {
                let snapshot = match snapshot {
                    Some(snapshot) => snapshot,
                    None => {
                        let scope = CustomerScope::for_operator(delivery.customer_id);
                        let findings = self
                            .findings
                            .findings_by_ids(scope, &delivery.finding_ids)
                            .await
                            .map_err(|e| unprepared("reading the findings failed", e))?;
                        let snapshot = render::snapshot(findings).map_err(|e| {
                            Unprepared::Unsendable(format!("rendering the body failed: {e}"))
                        })?;
                        self.deliveries
                            .keep_snapshot(delivery, &snapshot)
                            .await
                            .map_err(|e| unprepared("keeping the body failed", e))?
                    }
                };
                render::render_snapshot(target.webhook_type, delivery, &snapshot).map_err(|e| {
                    Unprepared::Unsendable(format!("rendering the body failed: {e}"))
                })?
            }
        };
        let secrets = open_secrets(&self.keyring, delivery, target)
            .map_err(|e| unprepared("the signing secret cannot be opened", e))?;
        Ok((body, secrets))
    }

    /// Sends one claimed delivery and records the attempt. A delivery that cannot be
    /// prepared counts a failed attempt with the reason (and so ends `failed` at the cap);
    /// only an unreachable database leaves it to the next claim without an attempt.
    pub async fn deliver(&self, claimed: ClaimedDelivery) -> Result<Sent> {
        let ClaimedDelivery {
            delivery,
            target,
            body,
            snapshot,
        } = claimed;
        let (outcome, attempt) = match self.prepare(&delivery, &target, (body, snapshot)).await {
            Ok((body, secrets)) => {
                let id = delivery.id.to_string();
                let headers = secrets.headers(&delivery, &id);
                self.client.send(&target.url, &body, &headers).await
            }
            Err(Unprepared::Unavailable(unavailable)) => return Err(unavailable),
            Err(Unprepared::Unsendable(reason)) => (
                Outcome::Failed {
                    status: None,
                    error: reason.clone(),
                    retry_after: None,
                },
                Attempt {
                    number: 0,
                    started_at: self.config.clock.now(),
                    latency_ms: 0,
                    status_code: None,
                    error: Some(reason),
                    response_excerpt: None,
                    detail: None,
                },
            ),
        };
        let attempts_made = delivery.attempts_in_schedule() + 1;
        let (next, sent) = self.next_step(&outcome, attempts_made);
        observe(&delivery, &target, &attempt, sent, attempts_made);
        self.record(&delivery, &attempt, next).await?;
        Ok(sent)
    }

    /// What follows an attempt's outcome: delivered, gone, or another attempt when the
    /// retry policy grants one after `attempts_made`, failed otherwise.
    fn next_step(&self, outcome: &Outcome, attempts_made: u32) -> (NextStep, Sent) {
        match outcome {
            Outcome::Delivered { .. } => (NextStep::Delivered, Sent::Delivered),
            Outcome::Gone => (NextStep::Gone, Sent::Gone),
            Outcome::Failed { retry_after, .. } => {
                match self
                    .config
                    .retry
                    .next_delay(attempts_made, self.jitter(), *retry_after)
                {
                    Some(delay) => (
                        NextStep::RetryAt(
                            // A delay past chrono's range (never, with the policy's cap)
                            // would mean "never": retry at the cap instead of at once.
                            self.config.clock.now()
                                + chrono::Duration::from_std(delay)
                                    .unwrap_or(chrono::Duration::MAX),
                        ),
                        Sent::Retrying,
                    ),
                    None => (NextStep::Failed, Sent::Failed),
                }
            }
        }
    }

    /// Records an attempt. If the database refuses the record itself (not because it is
    /// unreachable), the attempt is recorded again without what came from the receiver, so
    /// that it still counts: an attempt that cannot be recorded must never leave its
    /// delivery to be sent again at every lease expiry, unseen.
    async fn record(&self, delivery: &Delivery, attempt: &Attempt, next: NextStep) -> Result<()> {
        let id = &self.config.id;
        match self
            .deliveries
            .finish_attempt(id, delivery, attempt, next)
            .await
        {
            Err(Error::Unavailable(e)) => Err(Error::Unavailable(e)),
            Err(refused) => {
                tracing::error!(
                    delivery.id = %delivery.id,
                    error = error_chain(&refused),
                    "the attempt could not be recorded as it was: recorded without the receiver's answer"
                );
                let bare = Attempt {
                    error: Some("the attempt's details could not be recorded".to_owned()),
                    response_excerpt: None,
                    detail: None,
                    ..attempt.clone()
                };
                self.deliveries
                    .finish_attempt(id, delivery, &bare, next)
                    .await
            }
            ok => ok,
        }
    }
}

/// An attempt's metrics and its log line.
fn observe(
    delivery: &Delivery,
    target: &DeliveryTarget,
    attempt: &Attempt,
    sent: Sent,
    attempts_made: u32,
) {
    let outcome = match sent {
        Sent::Delivered => "delivered",
        Sent::Retrying => "retrying",
        Sent::Failed => "failed",
        Sent::Gone => "gone",
    };
    // `receiver`: the subscription's type (generic, slack, teams), a closed set.
    let receiver = target.webhook_type.as_str();
    metrics::counter!("posture_webhook_attempts_total", "outcome" => outcome, "receiver" => receiver)
        .increment(1);
    metrics::histogram!("posture_webhook_attempt_duration_seconds", "receiver" => receiver)
        .record(f64::from(attempt.latency_ms) / 1000.0);
    tracing::info!(
        delivery.id = %delivery.id,
        customer.id = %delivery.customer_id,
        subscription.id = %delivery.subscription_id,
        event = delivery.event_type.as_str(),
        // Numbered as the API's log numbers them (over every schedule); the retry policy
        // counts the current schedule's.
        attempt = delivery.attempts + 1,
        attempt_in_schedule = attempts_made,
        http.status = attempt.status_code,
        latency_ms = attempt.latency_ms,
        outcome = ?sent,
        error = attempt.error.as_deref(),
        detail = attempt.detail.as_deref(),
        "webhook attempt"
    );
}
