//! The worker loop: claim due deliveries, send them with bounded concurrency, record every
//! attempt, repeat.
//!
//! Claims are leases (`FOR UPDATE SKIP LOCKED`): any number of workers run side by side and
//! never hold the same delivery at once; a crashed worker's claims are retried when their
//! lease ends. An idle worker sleeps until PostgreSQL notifies it of new deliveries, or the
//! poll interval passes (retries come due without a notification). On shutdown it starts
//! nothing new, lets in-flight attempts finish (each is bounded by the request timeout) and
//! releases the claims it did not start.

use std::{sync::Arc, time::Duration};

use posture_domain::{
    CustomerId, CustomerScope, Error, Result,
    delivery::{
        Attempt, ClaimedDelivery, Delivery, DeliveryTarget, NextStep, Outcome, RetryPolicy,
    },
    fair_share::{FairShare, Lane, LaneBook},
    ports::{
        DeliveryRepository, EventRepository, FindingRepository, IdempotencyRepository,
        PassStatistics, UsageRepository,
    },
    secrets::Keyring,
};
use ring::rand::{SecureRandom, SystemRandom};
use tokio::{sync::watch, task::JoinSet};

mod housekeeping;

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
    deliveries: Arc<dyn DeliveryRepository>,
    findings: Arc<dyn FindingRepository>,
    keyring: Arc<Keyring>,
    client: WebhookClient,
    config: WorkerConfig,
    random: SystemRandom,
    /// Where the ingest gauges come from (`None`: not exported).
    passes: Option<Arc<dyn PassStatistics>>,
    /// The events feed and how long it keeps events (`None`: not swept by this worker).
    events: Option<(Arc<dyn EventRepository>, chrono::Duration)>,
    /// When the queue and ingest gauges were last refreshed.
    gauges_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// When the delivery log was last swept.
    swept_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// Where idempotency keys are kept (`None`: not swept by this worker).
    idempotency: Option<Arc<dyn IdempotencyRepository>>,
    /// When triage marks past their expiry were last recorded.
    triage_swept_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// Where the customers' storage usage is measured (`None`: no usage gauges).
    usage: Option<Arc<dyn UsageRepository>>,
    /// When the usage gauges were last refreshed.
    usage_at: std::sync::Mutex<Option<std::time::Instant>>,
}

/// An error with its causes, one line.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
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
            usage: None,
            usage_at: std::sync::Mutex::default(),
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

    /// Forgets idempotency keys past their 24 hours at each sweep.
    pub fn with_idempotency_keys(mut self, keys: Arc<dyn IdempotencyRepository>) -> Self {
        self.idempotency = Some(keys);
        self
    }

    /// Exports the usage gauges too (`posture_customer_usage_*`: how the customers' stored
    /// bytes spread, hourly), measured by `usage`.
    pub fn with_usage(mut self, usage: Arc<dyn UsageRepository>) -> Self {
        self.usage = Some(usage);
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

    /// Claims what `lane`'s free slots may take and starts sending each claimed delivery
    /// in `tasks`; returns how many were claimed.
    async fn claim_into(
        self: &Arc<Self>,
        lane: Lane,
        book: &mut LaneBook,
        tasks: &mut JoinSet<(Lane, CustomerId)>,
    ) -> Result<usize> {
        let claim = book.claim(&self.config.id, lane, self.config.lease, self.config.share);
        if claim.limit == 0 {
            return Ok(0);
        }
        let claimed = self.deliveries.claim_due(&claim).await?;
        let count = claimed.len();
        for delivery in claimed {
            let customer = delivery.delivery.customer_id;
            book.take(lane, customer);
            let worker = self.clone();
            tasks.spawn(async move {
                let id = delivery.delivery.id;
                if let Err(e) = worker.deliver(delivery).await {
                    // The lease ends and another attempt follows; nothing is lost.
                    tracing::warn!(delivery.id = %id, error = error_chain(&e), "delivery not attempted: the database is unreachable");
                }
                (lane, customer)
            });
        }
        if count > 0 {
            publish_lanes(book);
        }
        Ok(count)
    }

    /// Claims for every lane with free slots; returns how many were claimed (a failed claim
    /// is logged and counts none: the next look tries again).
    async fn claim_lanes(
        self: &Arc<Self>,
        book: &mut LaneBook,
        tasks: &mut JoinSet<(Lane, CustomerId)>,
        only_if_worth_it: bool,
    ) -> usize {
        let mut claimed = 0;
        for lane in Lane::ALL {
            let free = book.free(lane);
            // After a completion, a lane claims once a quarter of it is free (or all of it):
            // one statement per finished delivery would cost the database more than the
            // sending. A notification or the poll interval claims whatever is free.
            let slots = book.slots(lane).slots;
            if free == 0 || (only_if_worth_it && free < (slots / 4).max(1) && free < slots) {
                continue;
            }
            match self.claim_into(lane, book, tasks).await {
                Ok(n) => claimed += n,
                Err(e) => {
                    tracing::warn!(lane = lane.as_str(), error = %e, "claiming deliveries failed; retrying")
                }
            }
        }
        claimed
    }

    /// A worker's slots: its concurrency on the prompt lane, its slow concurrency on the
    /// slow one.
    fn lanes(&self) -> LaneBook {
        LaneBook::new(self.config.concurrency, self.config.slow_concurrency)
    }

    /// Sends everything due now, then returns how many deliveries were attempted
    /// (`posture-worker --once`).
    pub async fn drain(self: &Arc<Self>) -> Result<usize> {
        let mut book = self.lanes();
        let mut tasks = JoinSet::new();
        let mut attempted = 0;
        loop {
            let mut claimed = 0;
            for lane in Lane::ALL {
                if book.free(lane) > 0 {
                    claimed += self.claim_into(lane, &mut book, &mut tasks).await?;
                }
            }
            attempted += claimed;
            if claimed == 0 && tasks.is_empty() {
                return Ok(attempted);
            }
            if let Some(Ok((lane, customer))) = tasks.join_next().await {
                book.give_back(lane, customer);
            }
            while let Some(Ok((lane, customer))) = tasks.try_join_next() {
                book.give_back(lane, customer);
            }
        }
    }

    /// Works until `stop` turns true: claims as slots free, each lane on its own, and does
    /// the housekeeping (gauges, sweeps, triage expiry) beside, so that a long sweep never
    /// holds a claim back.
    pub async fn run(self: &Arc<Self>, mut stop: watch::Receiver<bool>) {
        tracing::info!(
            worker = %self.config.id,
            concurrency = self.config.concurrency,
            slow_concurrency = self.config.slow_concurrency,
            "posture-worker running"
        );
        let housekeeping = tokio::spawn({
            let worker = self.clone();
            let mut stop = stop.clone();
            async move {
                while !*stop.borrow() {
                    worker.refresh_queue_gauges().await;
                    worker.sweep_when_due().await;
                    worker.expire_triage_when_due().await;
                    worker.refresh_usage_gauges().await;
                    tokio::select! {
                        _ = stop.changed() => {}
                        () = tokio::time::sleep(HOUSEKEEPING_EVERY) => {}
                    }
                }
            }
        });
        let mut book = self.lanes();
        let mut tasks: JoinSet<(Lane, CustomerId)> = JoinSet::new();
        // LISTEN failures in a row: the wait before trying again grows from 1 s to the poll
        // interval, so a LISTEN broken for a moment (a restart, a full server) is back within
        // seconds, and one broken for good costs a line per poll interval.
        let mut listen_failures: u32 = 0;
        let mut after_completion = false;
        while !*stop.borrow() {
            self.claim_lanes(&mut book, &mut tasks, after_completion)
                .await;
            after_completion = false;
            tokio::select! {
                _ = stop.changed() => {}
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    if let Ok((lane, customer)) = done {
                        book.give_back(lane, customer);
                    }
                    while let Some(Ok((lane, customer))) = tasks.try_join_next() {
                        book.give_back(lane, customer);
                    }
                    publish_lanes(&book);
                    after_completion = true;
                }
                woken = self.deliveries.wait_for_work(self.config.poll_interval) => {
                    match woken {
                        Ok(_) => listen_failures = 0,
                        Err(e) => {
                            tracing::warn!(error = %e, "waiting for notifications failed; polling");
                            let retry = Duration::from_secs(1)
                                .saturating_mul(1 << listen_failures.min(16))
                                .min(self.config.poll_interval);
                            listen_failures = listen_failures.saturating_add(1);
                            tokio::select! {
                                _ = stop.changed() => {}
                                () = tokio::time::sleep(retry) => {}
                            }
                        }
                    }
                }
            }
        }
        // Nothing new starts; what is in flight finishes (each bounded by the timeout).
        while tasks.join_next().await.is_some() {}
        let _ = housekeeping.await;
        tracing::info!(worker = %self.config.id, "posture-worker stopped");
    }
}

/// How often the housekeeping looks whether a gauge or a sweep is due.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(1);

/// `posture_worker_slots{lane, state}`: this worker's slots of each lane, and those busy.
fn publish_lanes(book: &LaneBook) {
    for lane in Lane::ALL {
        let slots = book.slots(lane).slots;
        let free = book.free(lane);
        metrics::gauge!("posture_worker_slots", "lane" => lane.as_str(), "state" => "max")
            .set(slots as f64);
        metrics::gauge!("posture_worker_slots", "lane" => lane.as_str(), "state" => "busy")
            .set((slots - free) as f64);
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
