//! What a worker does besides delivering: publishing the queue's gauges and sweeping the
//! delivery log, each at most as often as its interval.

use std::time::Duration;

use chrono::Utc;
use posture_domain::{Result, webhook::MAX_HOLD_HOURS};

use super::Worker;

/// The window of the ingest gauges.
const PASS_WINDOW: Duration = Duration::from_secs(3600);
/// How often a running worker sweeps the delivery log of what its retention drops.
const SWEEP_EVERY: Duration = Duration::from_secs(600);
/// Deliveries deleted per statement of a sweep (short transactions, bounded locks).
const SWEEP_BATCH: u32 = 1000;

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
        let cutoff = Utc::now() - self.config.retention;
        let mut deleted = 0;
        loop {
            let batch = self.deliveries.purge_finished(cutoff, SWEEP_BATCH).await?;
            deleted += batch;
            if batch < u64::from(SWEEP_BATCH) {
                break;
            }
        }
        if deleted > 0 {
            metrics::counter!("posture_webhook_deliveries_expired_total").increment(deleted);
            tracing::info!(
                deleted,
                retention_days = self.config.retention.num_days(),
                "delivery log swept"
            );
        }
        self.sweep_events().await?;
        let now = Utc::now();
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
        let cutoff = Utc::now() - *retention;
        let mut deleted = 0;
        loop {
            let batch = events.purge_events(cutoff, SWEEP_BATCH).await?;
            deleted += batch;
            if batch < u64::from(SWEEP_BATCH) {
                break;
            }
        }
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
