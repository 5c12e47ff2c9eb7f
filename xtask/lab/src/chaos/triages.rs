//! Triage writes under a fault: a customer's key marks its findings in turn
//! (`PATCH /findings/{id}`), each answered 200 an acknowledged write whose mark must be in
//! the database afterwards.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use serde_json::json;

use super::cluster::{Cluster, Customer};

/// Between two writes: under the customer's 120 triage writes a minute.
const PAUSE: Duration = Duration::from_millis(550);

/// The findings' marks as last acknowledged, and the writes acknowledged.
#[derive(Default)]
pub struct Triages {
    last: BTreeMap<String, &'static str>,
    acknowledged: usize,
    /// Answers in 500..=599 but 503.
    server_errors: usize,
}

/// A triage writer running until its flag is set.
pub struct Writing {
    stop: Arc<AtomicBool>,
    triages: Arc<Mutex<Triages>>,
    thread: JoinHandle<()>,
}

/// Starts marking 20 of `customer`'s findings in turn on the instances in turn,
/// `acknowledged` and `untriaged` by rounds.
pub fn start(cluster: &Cluster, customer: &Customer) -> anyhow::Result<Writing> {
    let ids: Vec<String> = cluster
        .psql(&format!(
            "SELECT string_agg(id, ',') FROM (SELECT id FROM findings \
             WHERE customer_id = '{}' ORDER BY id LIMIT 20) f",
            customer.id
        ))?
        .split(',')
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .collect();
    anyhow::ensure!(!ids.is_empty(), "the customer has no findings to triage");
    let stop = Arc::new(AtomicBool::new(false));
    let triages = Arc::new(Mutex::new(Triages::default()));
    let (bases, key) = (cluster.bases(), customer.key.clone());
    let thread = {
        let (stop, triages) = (stop.clone(), triages.clone());
        std::thread::spawn(move || write_loop(&bases, &key, &ids, &stop, &triages))
    };
    Ok(Writing {
        stop,
        triages,
        thread,
    })
}

fn write_loop(
    bases: &[String],
    key: &str,
    ids: &[String],
    stop: &AtomicBool,
    triages: &Mutex<Triages>,
) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
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
            let id = &ids[turn % ids.len()];
            let state = if (turn / ids.len()).is_multiple_of(2) {
                "acknowledged"
            } else {
                "untriaged"
            };
            let base = &bases[turn % bases.len()];
            turn += 1;
            let answer = http
                .patch(format!("{base}/api/v1/findings/{id}"))
                .bearer_auth(key)
                .json(&json!({"triage": {"state": state}}))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .ok();
            {
                let mut t = triages.lock().unwrap_or_else(|p| p.into_inner());
                if answer == Some(200) {
                    t.last.insert(id.clone(), state);
                    t.acknowledged += 1;
                } else {
                    // Not acknowledged: it may or may not have happened.
                    t.last.remove(id);
                    t.server_errors += usize::from(
                        answer.is_some_and(|status| (500..=599).contains(&status) && status != 503),
                    );
                }
            }
            tokio::time::sleep(PAUSE).await;
        }
    });
}

impl Writing {
    /// Stops the writer; returns the acknowledged writes whose mark is not in the database,
    /// the writes acknowledged, and the answers that were server errors other than `503`.
    pub fn lost(
        self,
        cluster: &Cluster,
        customer: &Customer,
    ) -> anyhow::Result<(usize, usize, usize)> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        let triages = self.triages.lock().unwrap_or_else(|p| p.into_inner());
        let mut lost = 0;
        for (id, state) in &triages.last {
            let stored = cluster.psql(&format!(
                "SELECT triage_state FROM findings WHERE customer_id = '{}' AND id = '{id}'",
                customer.id
            ))?;
            lost += usize::from(stored != *state);
        }
        Ok((lost, triages.acknowledged, triages.server_errors))
    }
}
