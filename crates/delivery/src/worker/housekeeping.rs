//! What a worker does besides delivering: publishing the queue's gauges and sweeping the
//! delivery log, each at most as often as its interval.

use std::time::Duration;

use posture_domain::{
    Result,
    usage::{StorageCategory, spread},
    webhook::MAX_HOLD_HOURS,
};

use super::sending::Worker;

/// The window of the ingest gauges.
const PASS_WINDOW: Duration = Duration::from_secs(3600);
/// How often a running worker sweeps the delivery log of what its retention drops.
const SWEEP_EVERY: Duration = Duration::from_secs(600);
/// Deliveries deleted per statement of a sweep (short transactions, bounded locks).
const SWEEP_BATCH: u32 = 1000;
/// How often a running worker records the triage marks past their expiry (reads show them
/// `untriaged` at once; the record, its event and the sync follow within this).
const TRIAGE_SWEEP_EVERY: Duration = Duration::from_secs(30);
/// Marks recorded per round of the triage sweep.
const TRIAGE_BATCH: u32 = 500;

/// Runs `round` (which handles at most `batch` rows) until a round handles fewer; the sum.
async fn in_rounds<F, Fut>(batch: u32, mut round: F) -> Result<u64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<u64>>,
{
    let mut total = 0;
    loop {
        let done = round().await?;
        total += done;
        if done < u64::from(batch) {
            return Ok(total);
        }
    }
}

impl Worker {
    /// Publishes the queue's depth and the last hour's passes, at most every 10 s.
    pub(super) async fn refresh_queue_gauges(&self) {
        const EVERY: Duration = Duration::from_secs(10);
        {
            let mut last = self.gauges_at.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| at.elapsed() < EVERY) {
                return;
            }
            *last = Some(std::time::Instant::now());
        }
        if let Ok(depth) = self.deliveries.queue_depth().await {
            metrics::gauge!("posture_webhook_queue_depth", "state" => "pending")
                .set(depth.pending as f64);
            metrics::gauge!("posture_webhook_queue_depth", "state" => "due").set(depth.due as f64);
            metrics::gauge!("posture_webhook_queue_oldest_due_seconds")
                .set(depth.oldest_due_secs as f64);
        }
        let Some(passes) = &self.passes else {
            return;
        };
        if let Ok(recent) = passes.recent_passes(PASS_WINDOW).await {
            metrics::gauge!("posture_ingest_passes_last_hour").set(recent.count as f64);
            for (quantile, seconds) in [
                ("0.5", recent.median_secs),
                ("0.99", recent.p99_secs),
                ("1", recent.longest_secs),
            ] {
                metrics::gauge!("posture_ingest_pass_duration_seconds", "quantile" => quantile)
                    .set(seconds);
            }
            if let Some(since) = recent.since_last_secs {
                metrics::gauge!("posture_ingest_last_pass_age_seconds").set(since);
            }
        }
    }

    /// Deletes the finished deliveries older than the retention, in batches (returns how
    /// many); disables subscriptions failing for longer than `disable_after`; cancels what
    /// paused subscriptions held past [`MAX_HOLD_HOURS`]; forgets previous secrets whose
    /// overlap ended. Every worker sweeps (each batch skips rows another is deleting).
    pub async fn sweep(&self) -> Result<u64> {
        let cutoff = self.config.clock.now() - self.config.retention;
        let deleted = in_rounds(SWEEP_BATCH, || {
            self.deliveries.purge_finished(cutoff, SWEEP_BATCH)
        })
        .await?;
        if deleted > 0 {
            metrics::counter!("posture_webhook_deliveries_expired_total").increment(deleted);
            tracing::info!(
                deleted,
                retention_days = self.config.retention.num_days(),
                "delivery log swept"
            );
        }
        let bodies = in_rounds(SWEEP_BATCH, || {
            self.deliveries.purge_snapshots(cutoff, SWEEP_BATCH)
        })
        .await?;
        if bodies > 0 {
            tracing::debug!(bodies, "bodies of chunks no delivery is left of deleted");
        }
        self.sweep_events().await?;
        let now = self.config.clock.now();
        if let Some((audit, retention)) = &self.audit {
            // The audit log's chores fail on their own: the rest of the sweep goes on.
            let swept = in_rounds(SWEEP_BATCH, || {
                audit.sweep_audit(now - *retention, SWEEP_BATCH)
            })
            .await;
            match swept {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(
                    deleted,
                    retention_days = retention.num_days(),
                    "audit log swept"
                ),
                Err(e) => tracing::warn!(error = %e, "the audit log's retention sweep failed"),
            }
            match audit.notice_inactive_soon(now).await {
                Ok(0) => {}
                Ok(noticed) => tracing::debug!(
                    noticed,
                    "notices of credentials lapsing for inactivity written"
                ),
                Err(e) => tracing::warn!(error = %e, "the inactivity notices failed"),
            }
        }
        if let Some(keys) = &self.idempotency {
            let forgotten = in_rounds(SWEEP_BATCH, || {
                keys.purge_idempotency_keys(now, SWEEP_BATCH)
            })
            .await?;
            if forgotten > 0 {
                tracing::debug!(forgotten, "idempotency keys past 24 h forgotten");
            }
        }
        for (customer, subscription) in self
            .deliveries
            .disable_failing(now - self.config.disable_after)
            .await?
        {
            metrics::counter!("posture_webhook_subscriptions_disabled_total", "reason" => "failing")
                .increment(1);
            tracing::warn!(
                customer.id = %customer,
                subscription.id = %subscription,
                failing_days = self.config.disable_after.num_days(),
                "webhook subscription disabled: every attempt failed; its pending deliveries are cancelled"
            );
        }
        let (held, forgotten) = self
            .deliveries
            .expire_holds_and_secrets(now - chrono::Duration::hours(MAX_HOLD_HOURS))
            .await?;
        if held > 0 {
            metrics::counter!("posture_webhook_deliveries_held_expired_total").increment(held);
            tracing::info!(
                held,
                "deliveries held by paused subscriptions past {MAX_HOLD_HOURS} h cancelled"
            );
        }
        if forgotten > 0 {
            tracing::info!(
                forgotten,
                "previous signing secrets past their overlap forgotten"
            );
        }
        Ok(deleted)
    }

    /// Deletes the events older than their retention, in batches.
    async fn sweep_events(&self) -> Result<()> {
        let Some((events, retention)) = &self.events else {
            return Ok(());
        };
        let cutoff = self.config.clock.now() - *retention;
        let deleted = in_rounds(SWEEP_BATCH, || events.purge_events(cutoff, SWEEP_BATCH)).await?;
        if deleted > 0 {
            metrics::counter!("posture_events_expired_total").increment(deleted);
            tracing::info!(
                deleted,
                retention_days = retention.num_days(),
                "events feed swept"
            );
        }
        Ok(())
    }

    /// Records the triage marks past their expiry as `untriaged` (with their history,
    /// events and deliveries), in rounds of [`TRIAGE_BATCH`]; returns how many.
    pub async fn expire_triage(&self) -> Result<u64> {
        let expired = in_rounds(TRIAGE_BATCH, || self.findings.expire_triage(TRIAGE_BATCH)).await?;
        if expired > 0 {
            metrics::counter!("posture_triage_expired_total").increment(expired);
            tracing::info!(
                expired,
                "triage marks past their expiry recorded as untriaged"
            );
        }
        Ok(expired)
    }

    /// Records expired triage marks when [`TRIAGE_SWEEP_EVERY`] has passed since the last
    /// time.
    pub(super) async fn expire_triage_when_due(&self) {
        {
            let mut last = self
                .triage_swept_at
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| at.elapsed() < TRIAGE_SWEEP_EVERY) {
                return;
            }
            *last = Some(std::time::Instant::now());
        }
        if let Err(e) = self.expire_triage().await {
            tracing::warn!(error = %e, "recording expired triage marks failed; retrying at the next round");
        }
    }

    /// Publishes how the customers' stored bytes spread, by category, at once and then at
    /// every interval of [`Worker::with_usage`] until `stop` turns true (it reads every row
    /// of customer data, in a task of its own so that no sweep waits for it): the median,
    /// the 99th percentile and the largest customer's, never which customer (`posture-api
    /// customers usage` names them). A worker that finds another measuring skips its turn.
    pub(super) async fn measure_usage_until(&self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let Some((usage, every)) = &self.usage else {
            return;
        };
        while !*stop.borrow() {
            match usage.storage_usage_alone().await {
                Ok(Some(customers)) => publish_usage(&customers),
                Ok(None) => {
                    tracing::debug!("another worker is measuring the customers' stored data");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "measuring the customers' stored data failed; measured again at the next interval");
                }
            }
            tokio::select! {
                _ = stop.changed() => {}
                () = tokio::time::sleep(*every) => {}
            }
        }
    }

    /// Sweeps the delivery log when [`SWEEP_EVERY`] has passed since the last sweep.
    pub(super) async fn sweep_when_due(&self) {
        {
            let mut last = self.swept_at.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| at.elapsed() < SWEEP_EVERY) {
                return;
            }
            *last = Some(std::time::Instant::now());
        }
        if let Err(e) = self.sweep().await {
            tracing::warn!(error = %e, "sweeping the delivery log failed; retrying at the next sweep");
        }
    }
}

/// `posture_customer_usage_*` from a measure of every customer.
fn publish_usage(customers: &[posture_domain::usage::CustomerUsage]) {
    metrics::gauge!("posture_customer_usage_customers").set(customers.len() as f64);
    for category in StorageCategory::ALL {
        let [median, p99, largest] = spread(customers, *category);
        for (quantile, bytes) in [("0.5", median), ("0.99", p99), ("1", largest)] {
            metrics::gauge!(
                "posture_customer_usage_bytes",
                "category" => category.as_str(),
                "quantile" => quantile
            )
            .set(bytes as f64);
        }
    }
}
