//! How a worker runs: claims as its slots free, lane by lane and fairly between customers
//! (`posture_domain::fair_share`), each claimed delivery sent at once in a task of its own;
//! the housekeeping beside, so that a long sweep never holds a claim back.

use std::{collections::HashMap, sync::Arc, time::Duration};

use posture_domain::{
    CustomerId, Result,
    fair_share::{Lane, LaneBook},
};
use tokio::{
    sync::watch,
    task::{Id, JoinError, JoinSet},
};

use super::sending::{Worker, error_chain};

impl Worker {
    /// Claims what `lane`'s free slots may take and starts sending each claimed delivery
    /// in `tasks`; returns how many were claimed.
    async fn claim_into(
        self: &Arc<Self>,
        lane: Lane,
        book: &mut LaneBook,
        tasks: &mut InFlight,
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
            tasks.spawn(lane, customer, async move {
                let id = delivery.delivery.id;
                if let Err(e) = worker.deliver(delivery).await {
                    // The lease ends and another attempt follows; nothing is lost.
                    tracing::warn!(delivery.id = %id, error = error_chain(&e), "delivery not attempted: the database is unreachable");
                }
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
        tasks: &mut InFlight,
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
        let mut tasks = InFlight::default();
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
            if let Some((lane, customer)) = tasks.join_next().await {
                book.give_back(lane, customer);
            }
            while let Some((lane, customer)) = tasks.try_join_next() {
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
                    tokio::select! {
                        _ = stop.changed() => {}
                        () = tokio::time::sleep(HOUSEKEEPING_EVERY) => {}
                    }
                }
            }
        });
        let usage = tokio::spawn({
            let worker = self.clone();
            let stop = stop.clone();
            async move { worker.measure_usage_until(stop).await }
        });
        let mut book = self.lanes();
        let mut tasks = InFlight::default();
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
                Some((lane, customer)) = tasks.join_next(), if !tasks.is_empty() => {
                    book.give_back(lane, customer);
                    while let Some((lane, customer)) = tasks.try_join_next() {
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
        // A measure under way is only reads: it stops where it is.
        usage.abort();
        let _ = usage.await;
        tracing::info!(worker = %self.config.id, "posture-worker stopped");
    }
}

/// The deliveries being sent, each in a task of its own, and whose slot each holds: a task
/// that ends in any way (a panic too, which a defect could cause) gives its slot back.
#[derive(Default)]
struct InFlight {
    tasks: JoinSet<()>,
    slots: HashMap<Id, (Lane, CustomerId)>,
}

impl InFlight {
    fn spawn(
        &mut self,
        lane: Lane,
        customer: CustomerId,
        sending: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let task = self.tasks.spawn(sending);
        self.slots.insert(task.id(), (lane, customer));
    }

    fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The slot of the next task to end, once one does.
    async fn join_next(&mut self) -> Option<(Lane, CustomerId)> {
        loop {
            let ended = self.tasks.join_next_with_id().await?;
            if let Some(slot) = self.ended(ended) {
                return Some(slot);
            }
        }
    }

    /// The slot of a task ended already, if any.
    fn try_join_next(&mut self) -> Option<(Lane, CustomerId)> {
        loop {
            let ended = self.tasks.try_join_next_with_id()?;
            if let Some(slot) = self.ended(ended) {
                return Some(slot);
            }
        }
    }

    fn ended(
        &mut self,
        ended: std::result::Result<(Id, ()), JoinError>,
    ) -> Option<(Lane, CustomerId)> {
        let id = match ended {
            Ok((id, ())) => id,
            Err(e) => {
                // The delivery's lease ends and another attempt follows; nothing is lost.
                tracing::error!(error = %e, "a delivery's task ended before its attempt was recorded (a defect): its slot is given back");
                e.id()
            }
        };
        self.slots.remove(&id)
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
