//! The events feed under load (issue 39's figures):
//!
//! * 1,000 consumers waiting on one instance (`--events-waiters`), spread over customers as
//!   the bounds want them (32 per customer, 4 per key: 32 customers of 8 keys), first as
//!   long-polls (`wait=30`), then as streams (`Accept: text/event-stream`); a pass of each
//!   customer commits one new finding through `posture-api ingest`, one customer after the
//!   other; each consumer's time from its customer's commit (the `posture_data`
//!   notification, heard by a `LISTEN` of the bench's own) to the event in its hands: p50,
//!   p99, max; and the API's resident memory idle and with the 1,000 waiting;
//! * the feed read by cursor (`limit=500`) at the start and deep into a customer's 1,000,000
//!   events, then 10,000,000 (`--event-sizes`; the events written by SQL, over 1,000 real
//!   findings): events per second, and how flat it stays from the one to the other.

use std::{
    collections::HashMap,
    path::Path,
    process::Command,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use serde_json::Value;

use super::{
    Figure,
    http::{Server, wrk},
    listen::{Notified, listen},
    load::api,
};
use crate::{
    files::scratch_dir,
    process::{self, eprintln_status, psql_value},
};

/// Requests of one customer's keys that may wait at once (over every instance).
const PER_CUSTOMER: usize = 32;
/// Requests of one key that may wait at once.
const PER_KEY: usize = 4;
/// Findings of the depth customer (what its events name).
const FINDINGS: usize = 1000;
/// Findings of each waiting consumers' customer's base pass.
const WAITED_FINDINGS: usize = 10;

/// How consumers wait.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Consumer {
    LongPoll,
    Stream,
}

impl Consumer {
    fn name(self) -> &'static str {
        match self {
            Consumer::LongPoll => "long-poll",
            Consumer::Stream => "stream",
        }
    }
}

pub fn run(
    bin: &Path,
    server: &Server,
    database_url: &str,
    waiters: usize,
    sizes: &[i64],
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let &[smaller, larger] = sizes else {
        bail!("--event-sizes takes two sizes, smaller first");
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let dir = scratch_dir("bench-events")?;
    eprintln_status(&format!(
        "events feed: {} customers for {waiters} waiting consumers",
        waiters.div_ceil(PER_CUSTOMER)
    ));
    let waited = (0..waiters.div_ceil(PER_CUSTOMER))
        .map(|c| {
            let consumers = (waiters - c * PER_CUSTOMER).min(PER_CUSTOMER);
            Customer::create(
                bin,
                database_url,
                &dir,
                &format!("events-bench-waiters-{c}"),
                consumers.div_ceil(PER_KEY),
                WAITED_FINDINGS,
            )
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let idle_rss = rss_mib(server.pid())?;
    let mut with_waiters = 0.0_f64;
    for (round, consumer) in [Consumer::LongPoll, Consumer::Stream]
        .into_iter()
        .enumerate()
    {
        let (latencies, rss) = runtime.block_on(commit_to_consumers(
            bin,
            server,
            database_url,
            &waited,
            waiters,
            consumer,
            round + 1,
        ))?;
        with_waiters = with_waiters.max(rss);
        record_latencies(figures, consumer, &latencies);
    }
    figures.push(Figure::measure(
        "posture-api RSS, idle",
        idle_rss,
        "MiB",
        true,
    ));
    figures.push(Figure::measure(
        format!("posture-api RSS with {waiters} consumers waiting on the events feed"),
        with_waiters,
        "MiB",
        true,
    ));

    let deep = Customer::create(bin, database_url, &dir, "events-bench-depth", 1, FINDINGS)?;
    let mut rates = Vec::new();
    for total in [smaller, larger] {
        eprintln_status(&format!("events feed: writing events up to {total}"));
        deep.fill_events(database_url, total)?;
        let rate = read_rate_at_depth(server, database_url, &deep, total, duration, figures)?;
        rates.push(rate);
    }
    figures.push(
        Figure::measure(
            format!("events feed read 99 % deep in {larger} events vs in {smaller}"),
            rates[1],
            "events/s",
            false,
        )
        .against(
            rates[0],
            format!("the same read 99 % deep in {smaller} events"),
            Some(0.9),
        ),
    );
    Ok(())
}

/// A customer of the bench with its own keys (`read:findings`) and a first pass of
/// `findings`.
#[derive(Clone)]
struct Customer {
    id: String,
    keys: Vec<String>,
    pass: std::path::PathBuf,
    findings: usize,
}

impl Customer {
    fn create(
        bin: &Path,
        url: &str,
        dir: &Path,
        name: &str,
        keys: usize,
        findings: usize,
    ) -> anyhow::Result<Self> {
        let id = api(bin, url, &["customers", "create", "--name", name])?["id"]
            .as_str()
            .context("customer id")?
            .to_owned();
        let keys = (0..keys)
            .map(|i| {
                let issued = api(
                    bin,
                    url,
                    &[
                        "keys",
                        "issue",
                        "--customer",
                        &id,
                        "--name",
                        &format!("events-{i}"),
                        "--scope",
                        "read:findings",
                    ],
                )?;
                Ok(issued["key"].as_str().context("key")?.to_owned())
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let customer = Self {
            id,
            keys,
            pass: dir.join(format!("{name}.jsonl")),
            findings,
        };
        customer.ingest(bin, url, 0)?;
        Ok(customer)
    }

    /// A pass reporting the customer's findings and `new` more.
    fn ingest(&self, bin: &Path, url: &str, new: usize) -> anyhow::Result<()> {
        // A tenant belongs to one customer: the customer's own id serves as its GUID.
        let tenant = &self.id;
        let mut lines = vec![
            serde_json::json!({"type": "tenant", "cloudTenantId": tenant, "displayName": "Bench"}),
            serde_json::json!({"type": "identity", "id": "u1", "cloudTenantId": tenant,
                               "kind": "user", "displayName": "Ada"}),
        ];
        lines.extend((0..self.findings + new).map(|i| {
            serde_json::json!({"type": "finding", "id": format!("f{i:07}"),
                "cloudTenantId": tenant, "identityId": "u1",
                "findingType": "standing_privileged_access", "severity": "high",
                "status": "open", "title": format!("Finding {i}")})
        }));
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&self.pass, text)?;
        process::run(
            Command::new(bin)
                .args(["ingest", "--customer", &self.id])
                .arg(&self.pass)
                .env("DATABASE_URL", url)
                .env("POSTURE_LOG", "warn")
                .stdout(std::process::Stdio::null()),
        )
    }

    /// Writes events by SQL until the customer has `total`, each naming one of its
    /// findings, one per microsecond of an hour ago onwards (so that ids sort by number).
    fn fill_events(&self, url: &str, total: i64) -> anyhow::Result<()> {
        let id = &self.id;
        psql_value(
            url,
            &format!(
                "INSERT INTO finding_events (customer_id, id, seq, event_type, pass_id, \
                     finding_id, change, created_at) \
                 SELECT '{id}', posture_event_id(t, g), g, 'finding_high', \
                     '00000000-0000-7000-8000-000000000000', \
                     'f' || lpad((g % {FINDINGS})::text, 7, '0'), NULL, t \
                 FROM (SELECT g, now() - interval '1 hour' + g * interval '1 microsecond' AS t \
                       FROM generate_series((SELECT coalesce(max(seq), 0) + 1 \
                                             FROM finding_events WHERE customer_id = '{id}'), \
                                            {total}) g) s"
            ),
        )?;
        // Settled before the reads, as the load is: statistics current, and the pages the
        // insert dirtied written now rather than by a checkpoint during a measured run.
        psql_value(url, "VACUUM ANALYZE finding_events")?;
        psql_value(url, "CHECKPOINT")?;
        Ok(())
    }
}

/// The process's resident memory now.
fn rss_mib(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmRSS")?;
    Ok(kib / 1024.0)
}

/// The id of the customer's last event (the feed read to its end).
async fn last_event(
    client: &reqwest::Client,
    server: &Server,
    key: &str,
) -> anyhow::Result<String> {
    let mut after: Option<String> = None;
    loop {
        let mut url = format!("{}/api/v1/events?limit=500", server.base);
        if let Some(after) = &after {
            url.push_str(&format!("&after={after}"));
        }
        let page: Value = client
            .get(url)
            .bearer_auth(key)
            .send()
            .await?
            .json()
            .await?;
        after = page["meta"]["nextCursor"].as_str().map(str::to_owned);
        if page["meta"]["hasMore"] != true {
            return after.context("the customer has events");
        }
    }
}

/// `posture_event_waiters` as the instance reports it.
async fn waiting(client: &reqwest::Client, server: &Server) -> anyhow::Result<usize> {
    let text = client
        .get(format!("{}/metrics", server.base))
        .send()
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("posture_event_waiters "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0) as usize)
}

/// `waiters` consumers wait, spread over `customers` (32 each, 4 per key); a pass of each
/// customer commits one new finding (its `new`th), one customer after the other; each
/// consumer's seconds from its customer's commit notification to the event in its hands
/// (sorted), and the API's memory while they waited.
async fn commit_to_consumers(
    bin: &Path,
    server: &Server,
    database_url: &str,
    customers: &[Customer],
    waiters: usize,
    consumer: Consumer,
    new: usize,
) -> anyhow::Result<(Vec<f64>, f64)> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(120))
        .build()?;
    let mut afters = Vec::with_capacity(customers.len());
    for customer in customers {
        afters.push(last_event(&client, server, &customer.keys[0]).await?);
    }
    let committed: Notified = Arc::default();
    let listener = listen(database_url, committed.clone()).await?;
    let consumers: Vec<_> = (0..waiters)
        .map(|i| {
            let c = i / PER_CUSTOMER;
            let key = customers[c].keys[(i % PER_CUSTOMER) / PER_KEY].clone();
            let after = &afters[c];
            let client = client.clone();
            let url = match consumer {
                Consumer::LongPoll => {
                    format!("{}/api/v1/events?after={after}&wait=30", server.base)
                }
                Consumer::Stream => format!("{}/api/v1/events?after={after}", server.base),
            };
            tokio::spawn(async move {
                receive(&client, &url, &key, consumer)
                    .await
                    .map(|at| (c, at))
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now_waiting = waiting(&client, server).await?;
        if now_waiting >= waiters {
            break;
        }
        if Instant::now() > deadline {
            bail!("{waiters} consumers did not all wait ({now_waiting} did)");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rss = rss_mib(server.pid())?;
    eprintln_status(&format!(
        "events feed: {waiters} {} consumers waiting, each customer's pass commits",
        consumer.name()
    ));
    for customer in customers {
        let (bin, url, customer) = (bin.to_owned(), database_url.to_owned(), customer.clone());
        tokio::task::spawn_blocking(move || customer.ingest(&bin, &url, new)).await??;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let commits: HashMap<String, Instant> = loop {
        let heard = committed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        if customers.iter().all(|c| heard.contains_key(&c.id)) {
            break heard;
        }
        if Instant::now() > deadline {
            bail!("not every pass's notification was heard");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let mut latencies = Vec::with_capacity(waiters);
    for handle in consumers {
        let (c, received) = handle.await??;
        let at = commits[&customers[c].id];
        latencies.push(received.saturating_duration_since(at).as_secs_f64());
    }
    drop(listener);
    latencies.sort_by(f64::total_cmp);
    Ok((latencies, rss))
}

/// One consumer: the instant the first event was in its hands.
async fn receive(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    consumer: Consumer,
) -> anyhow::Result<Instant> {
    let mut request = client.get(url).bearer_auth(key);
    if consumer == Consumer::Stream {
        request = request.header("accept", "text/event-stream");
    }
    let response = request.send().await?;
    anyhow::ensure!(response.status().is_success(), "{}", response.status());
    match consumer {
        Consumer::LongPoll => {
            let page: Value = response.json().await?;
            let received = Instant::now();
            anyhow::ensure!(
                page["data"].as_array().is_some_and(|d| !d.is_empty()),
                "the wait ended without the event"
            );
            Ok(received)
        }
        Consumer::Stream => {
            let mut response = response;
            let mut seen = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                seen.extend_from_slice(&chunk);
                if seen.windows(4).any(|w| w == b"id: ") && seen.ends_with(b"\n\n") {
                    return Ok(Instant::now());
                }
            }
            bail!("the stream ended without the event")
        }
    }
}

fn record_latencies(figures: &mut Vec<Figure>, consumer: Consumer, latencies: &[f64]) {
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize] * 1000.0;
    let name = consumer.name();
    let waiters = latencies.len();
    for (label, value) in [("p50", at(0.5)), ("p99", at(0.99)), ("max", at(1.0))] {
        figures.push(Figure::measure(
            format!("events feed: commit to event, {waiters} {name} consumers, {label}"),
            value,
            "ms",
            true,
        ));
    }
}

/// Events per second read by cursor (`limit=500`) at the feed's start and at 99 % of its
/// depth; returns the rate at depth.
fn read_rate_at_depth(
    server: &Server,
    database_url: &str,
    customer: &Customer,
    total: i64,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<f64> {
    let depth = total - total / 100;
    let cursor = psql_value(
        database_url,
        &format!(
            "SELECT id FROM finding_events WHERE customer_id = '{}' AND seq = {depth}",
            customer.id
        ),
    )?;
    let key = &customer.keys[0];
    // Warm-up: the pages read at depth in memory, the statements prepared.
    wrk(
        &format!("{}/api/v1/events?limit=500&after={cursor}", server.base),
        key,
        16,
        Duration::from_secs(2),
    )?;
    let mut at_depth = 0.0;
    for (label, path) in [
        (
            "first page".to_owned(),
            "/api/v1/events?limit=500".to_owned(),
        ),
        (
            format!("depth {depth}"),
            format!("/api/v1/events?limit=500&after={cursor}"),
        ),
    ] {
        let load = wrk(&format!("{}{path}", server.base), key, 16, duration)?;
        let rate = load.requests_per_second * 500.0;
        figures.push(Figure::measure(
            format!("events feed read, {total} events, {label} (limit=500, 16 conn)"),
            rate,
            "events/s",
            false,
        ));
        at_depth = rate;
    }
    Ok(at_depth)
}
