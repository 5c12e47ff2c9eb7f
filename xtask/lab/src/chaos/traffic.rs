//! Read traffic while a fault is injected: tasks sending GETs to the API instances, each
//! request recorded with its outcome, latency and whether a 503 said when to retry.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

/// One request of the load.
#[derive(Clone, Debug)]
pub struct Sample {
    /// When it was sent, from the start of the load.
    pub sent: Duration,
    pub instance: usize,
    /// The path requested.
    pub path: &'static str,
    /// The status, or `None` when no response came (connection refused or reset, timeout).
    pub status: Option<u16>,
    pub latency: Duration,
    pub retry_after: bool,
    /// Why no response came (the error's chain), when none did.
    pub error: Option<String>,
    /// Whether the response's head arrived (its body may still have been cut).
    pub began: bool,
}

/// Requests sent until [`Load::stop`].
pub struct Load {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Sample>>,
    pub started: Instant,
}

/// The paths the load reads, in turn.
pub const PATHS: &[&str] = &[
    "/api/v1/findings?limit=50",
    "/api/v1/identities?limit=50",
    "/api/v1/findings?severity=critical&limit=20",
    "/api/v1/roles?limit=20",
];

/// What a load sends.
pub struct Spec<'a> {
    pub instances: &'a [String],
    /// Task `n` uses key `n % keys.len()`.
    pub keys: &'a [String],
    /// Tasks per instance, each sending one request at a time.
    pub tasks: usize,
    /// Pause after each request.
    pub pause: Duration,
    /// Paths requested in turn.
    pub paths: &'static [&'static str],
}

impl Load {
    /// `tasks` tasks per instance reading [`PATHS`] with `key`, 20 ms apart.
    pub fn start(instances: &[String], key: &str, tasks: usize) -> Self {
        Self::spec(&Spec {
            instances,
            keys: &[key.to_owned()],
            tasks,
            pause: Duration::from_millis(20),
            paths: PATHS,
        })
    }

    pub fn spec(spec: &Spec<'_>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let instances = spec.instances.to_vec();
        let keys = spec.keys.to_vec();
        let (tasks, pause, paths) = (spec.tasks, spec.pause, spec.paths);
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
            else {
                return Vec::new();
            };
            runtime.block_on(async move {
                let client = reqwest::Client::builder()
                    .timeout(Duration::from_secs(20))
                    // Under posture's 5 s keep-alive (docs/api.md, "Connections"): a task
                    // pausing 5 s between requests raced the server's close.
                    .pool_idle_timeout(Duration::from_secs(4))
                    .build()
                    .unwrap_or_default();
                let mut handles = Vec::new();
                for (instance, base) in instances.iter().enumerate() {
                    for task in 0..tasks {
                        let (client, base, key, stop) = (
                            client.clone(),
                            base.clone(),
                            keys[(instance * tasks + task) % keys.len().max(1)].clone(),
                            Arc::clone(&stopping),
                        );
                        handles.push(tokio::spawn(async move {
                            let mut samples = Vec::new();
                            let mut i = task;
                            while !stop.load(Ordering::Relaxed) {
                                let path = paths[i % paths.len()];
                                i += 1;
                                let sent = started.elapsed();
                                let response = client
                                    .get(format!("{base}{path}"))
                                    .bearer_auth(&key)
                                    .send()
                                    .await;
                                let began = response.is_ok();
                                let (status, retry_after, error) = match response {
                                    Ok(r) => {
                                        let retry = r.headers().contains_key("retry-after");
                                        let status = r.status().as_u16();
                                        // A response counts once its body arrived whole.
                                        match r.bytes().await {
                                            Ok(_) => (Some(status), retry, None),
                                            Err(e) => (
                                                None,
                                                false,
                                                Some(format!("{:#}", anyhow::Error::new(e))),
                                            ),
                                        }
                                    }
                                    Err(e) => {
                                        (None, false, Some(format!("{:#}", anyhow::Error::new(e))))
                                    }
                                };
                                samples.push(Sample {
                                    sent,
                                    instance,
                                    path,
                                    status,
                                    latency: started.elapsed().saturating_sub(sent),
                                    retry_after,
                                    error,
                                    began,
                                });
                                tokio::time::sleep(pause).await;
                            }
                            samples
                        }));
                    }
                }
                let mut all = Vec::new();
                for handle in handles {
                    if let Ok(samples) = handle.await {
                        all.extend(samples);
                    }
                }
                all.sort_by_key(|s| s.sent);
                all
            })
        });
        Self {
            stop,
            thread,
            started,
        }
    }

    /// Time since the load started (to mark when a fault began and ended).
    pub fn now(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn stop(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// What a set of samples shows.
#[derive(Debug, Default)]
pub struct Summary {
    pub requests: usize,
    pub ok: usize,
    pub unavailable: usize,
    pub unavailable_without_retry_after: usize,
    /// 5xx other than 503, and 4xx: none is expected under load with a valid key.
    pub other_errors: usize,
    pub no_response: usize,
    pub max_latency: Duration,
    /// Responses per status.
    pub statuses: std::collections::BTreeMap<u16, usize>,
    /// The requests without a response, by path and error (the first few distinct ones).
    pub why_no_response: std::collections::BTreeMap<String, usize>,
}

/// Distinct reasons for no response kept in a [`Summary`].
const MAX_REASONS: usize = 10;

impl Summary {
    pub fn of<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Self {
        let mut s = Self::default();
        for sample in samples {
            s.requests += 1;
            s.max_latency = s.max_latency.max(sample.latency);
            if let Some(status) = sample.status {
                *s.statuses.entry(status).or_default() += 1;
            }
            match sample.status {
                Some(200..=299) => s.ok += 1,
                Some(503) => {
                    s.unavailable += 1;
                    if !sample.retry_after {
                        s.unavailable_without_retry_after += 1;
                    }
                }
                Some(_) => s.other_errors += 1,
                None => {
                    s.no_response += 1;
                    let why = format!(
                        "GET {} (instance {}, {} ms, head {}): {}",
                        sample.path,
                        sample.instance,
                        sample.latency.as_millis(),
                        if sample.began {
                            "received"
                        } else {
                            "not received"
                        },
                        sample.error.as_deref().unwrap_or("no error recorded")
                    );
                    if s.why_no_response.len() < MAX_REASONS || s.why_no_response.contains_key(&why)
                    {
                        *s.why_no_response.entry(why).or_default() += 1;
                    }
                }
            }
        }
        s
    }
}

/// How long after `from` the requests succeed again for good: the time from `from` to the
/// first success after the last failure sent after `from`.
pub fn recovery_after(samples: &[Sample], from: Duration) -> Option<Duration> {
    let after: Vec<&Sample> = samples.iter().filter(|s| s.sent >= from).collect();
    let last_failure = after
        .iter()
        .rposition(|s| !matches!(s.status, Some(200..=299)));
    let first_ok = match last_failure {
        None => after.first(),
        Some(i) => after.get(i + 1),
    }?;
    Some((first_ok.sent + first_ok.latency).saturating_sub(from))
}
