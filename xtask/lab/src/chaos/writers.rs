//! Writers under a fault: a thread making one kind of write in turns, on the instances in
//! turn, paced under its customer's budget, each recording what its answers acknowledged
//! (`subscriptions.rs`, `triages.rs`, `scim_users.rs`). Stopping the thread hands the writer back, whose record
//! is then checked against the database.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

/// One kind of write and the record of its answers.
pub(super) trait Writer: Send + 'static {
    /// Between two writes: by default under a customer's 120 triage writes a minute.
    const PAUSE: Duration = Duration::from_millis(550);

    /// Makes the `turn`th write on the instance at `base` and records its answer.
    async fn write(&mut self, http: &reqwest::Client, base: &str, turn: usize);
}

/// A writer running on a thread of its own until stopped.
pub(super) struct Writing<W> {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<W>,
}

/// Starts `writer` on the instances at `bases` in turn.
pub(super) fn start<W: Writer>(bases: Vec<String>, writer: W) -> Writing<W> {
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let stop = stop.clone();
        std::thread::spawn(move || write_until_stopped(&bases, writer, &stop))
    };
    Writing { stop, thread }
}

impl<W> Writing<W> {
    /// Stops the writer and hands it back with its record.
    pub(super) fn stop(self) -> anyhow::Result<W> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("a writer's thread panicked"))
    }
}

/// A writer that cannot start (no runtime, no client) records nothing, which its checks
/// count as a failure ("nothing acknowledged").
fn write_until_stopped<W: Writer>(bases: &[String], mut writer: W, stop: &AtomicBool) -> W {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return writer;
    };
    runtime.block_on(async {
        let Ok(http) = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
        else {
            return;
        };
        let mut turn = 0usize;
        while !stop.load(Ordering::Relaxed) {
            writer.write(&http, &bases[turn % bases.len()], turn).await;
            turn += 1;
            tokio::time::sleep(W::PAUSE).await;
        }
    });
    writer
}

/// Whether a status is a server error other than `503` (whose `Retry-After` says "retry").
pub(super) fn server_error(status: u16) -> bool {
    (500..=599).contains(&status) && status != 503
}

/// A writer's record checked against the database: acknowledged writes not there, writes
/// acknowledged, answers that were server errors other than `503`.
pub(super) type Written = (usize, usize, usize);

/// What a writer's answers acknowledged: each item's value as last acknowledged (an item
/// whose last write was not acknowledged may or may not have changed, so it is dropped),
/// the writes acknowledged, and the answers that were server errors other than `503`.
pub(super) struct Record<V> {
    last: BTreeMap<String, V>,
    acknowledged: usize,
    server_errors: usize,
}

impl<V> Default for Record<V> {
    fn default() -> Self {
        Self {
            last: BTreeMap::new(),
            acknowledged: 0,
            server_errors: 0,
        }
    }
}

impl<V: PartialEq> Record<V> {
    /// A write to `id` acknowledged: its value is now `value`.
    pub(super) fn acknowledged(&mut self, id: String, value: V) {
        self.last.insert(id, value);
        self.acknowledged += 1;
    }

    /// A write (to `id`, when there is one) answered `answer`, or not at all, but not
    /// acknowledged: it may or may not have happened.
    pub(super) fn not_acknowledged(&mut self, id: Option<&str>, answer: Option<u16>) {
        if let Some(id) = id {
            self.last.remove(id);
        }
        self.server_errors += usize::from(answer.is_some_and(server_error));
    }

    /// `id`'s value as last acknowledged, when its last write was.
    pub(super) fn get(&self, id: &str) -> Option<&V> {
        self.last.get(id)
    }

    /// The record against the database, whose value of an item `stored` reads: the
    /// acknowledged writes not there, the writes acknowledged, the server errors.
    pub(super) fn checked(
        &self,
        mut stored: impl FnMut(&str) -> anyhow::Result<V>,
    ) -> anyhow::Result<Written> {
        let mut lost = 0;
        for (id, value) in &self.last {
            lost += usize::from(stored(id)? != *value);
        }
        Ok((lost, self.acknowledged, self.server_errors))
    }
}
