//! A noisy neighbour (docs/reliability.md, "Fair shares"): one customer, within every limit
//! the contract and the docs allow, tries to slow, fill and starve the others, against two
//! API instances and two workers with a deployment's settings.
//!
//! The noisy customer has three subscriptions on a receiver that answers after 9 s and 96
//! deliveries due to it; sends the 10 largest bulk triages the contract allows (500
//! findings, a comment of 2,000 four-byte characters that do not compress, each with an
//! `Idempotency-Key`)
//! within a minute, each queueing 15 more slow deliveries; and opens streams of its events
//! feed with 10 keys, 4 each, over both instances. Meanwhile two quiet customers read and
//! ingest. The promises:
//! - a quiet customer's delivery arrives at most 5 s after its pass commits (p99 over 20
//!   passes), its reads stay fast, and its streams are admitted;
//! - the noisy customer holds at most 4 deliveries in flight per subscription, and 32
//!   waiting places over both instances;
//! - its 10 bulks grow the database by at most 40 MiB (everything they cause delivered);
//! - past its budgets it is refused with 429, the envelope and `Retry-After`, never a 5xx.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{Value, json};

use super::{
    Context, block_on,
    cluster::{Cluster, Customer},
    receiver::Behaviour,
    report::{Report, secs},
    traffic::{Load, Spec, Summary},
};

const S: &str = "noisy neighbour";
/// How long the noisy receiver takes to answer.
const SLOW: Duration = Duration::from_secs(9);
/// The quiet customers' passes, each measured from its commit to its delivery.
const TRIALS: usize = 20;
/// A quiet delivery later than this ends the trials early (the promise is broken already).
const GIVE_UP: Duration = Duration::from_secs(30);
/// The largest bulk triages the contract allows, within a minute.
const BULKS: usize = 10;
/// Findings of the noisy customer's pass (750 of each severity: 32 chunks for each of its
/// three subscriptions).
const NOISY_FINDINGS: usize = 3000;

pub fn run(cluster: &mut Cluster, cx: &Context, report: &mut Report) -> anyhow::Result<()> {
    // A deployment's delivery settings: the default 10 s timeout (the slow receiver answers
    // within it), retries, leases and polls.
    cluster.restart_workers(true)?;
    let outcome = scenario(cluster, cx, report);
    cluster.restart_workers(false)?;
    outcome
}

fn scenario(cluster: &mut Cluster, cx: &Context, report: &mut Report) -> anyhow::Result<()> {
    let apis = cluster.bases();
    let noisy = cluster.customer("Noisy neighbour")?;
    let slow: Vec<String> = (0..3).map(|i| format!("noisy-{i}")).collect();
    let events = [
        "finding_critical",
        "finding_high",
        "finding_medium",
        "finding_low",
        "finding_triaged",
    ];
    for name in &slow {
        cx.receiver.set(name, Behaviour::Slow(SLOW));
        cx.subscribe(&noisy, name, &events)?;
    }
    let quiet: Vec<Customer> = (0..2)
        .map(|n| cluster.reader(&format!("q{n}")))
        .collect::<anyhow::Result<_>>()?;
    for (n, customer) in quiet.iter().enumerate() {
        cx.subscribe(customer, &format!("quiet-{n}"), &["finding_critical"])?;
    }
    let load = Load::spec(&Spec {
        instances: &apis,
        keys: &quiet.iter().map(|c| c.key.clone()).collect::<Vec<_>>(),
        tasks: 2,
        pause: Duration::from_millis(50),
        paths: super::traffic::PATHS,
    });
    let pass = cluster.ingest(&noisy, "n", NOISY_FINDINGS)?;
    let queued = pass["deliveriesQueued"]
        .as_i64()
        .context("deliveriesQueued")?;
    report.check(
        S,
        "noisy deliveries due (3 slow subscriptions)",
        queued,
        ">= 90",
        queued >= 90,
    );

    // Waiting places: the noisy customer's streams over both instances, then the quiet
    // customers' while those are open.
    let mut keys = vec![noisy.key.clone()];
    for _ in 0..9 {
        keys.push(cluster.key(&noisy)?);
    }
    let quiet_keys: Vec<String> = quiet.iter().map(|c| c.key.clone()).collect();
    let [noisy_streams, quiet_streams] = open_streams(&apis, [(&keys, 4), (&quiet_keys, 2)])?;
    let admitted = noisy_streams.get(&200).copied().unwrap_or(0);
    report.check(
        S,
        "noisy streams admitted of 40 (10 keys, 4 each, both instances)",
        admitted,
        "32: its places over every instance",
        admitted == 32,
    );
    report.check(
        S,
        "noisy streams refused with 429",
        noisy_streams.get(&429).copied().unwrap_or(0),
        "the rest",
        noisy_streams.get(&429).copied().unwrap_or(0) == 40 - admitted,
    );
    report.check(
        S,
        "quiet streams admitted meanwhile",
        format!("{quiet_streams:?}"),
        "all 200",
        quiet_streams.get(&200).copied() == Some(quiet_keys.len() * 2),
    );

    // The noisy customer's bulks, within a minute, and what they grow.
    let size_before = cluster.count("SELECT pg_database_size(current_database())")?;
    let bulks = send_bulks(&apis, &noisy.key, BULKS, "bulk")?;
    report.check(
        S,
        "the 10 largest bulk triages",
        format!("{bulks:?}"),
        "all 200",
        bulks.get(&200).copied() == Some(BULKS),
    );

    let kept = cluster.count(&format!(
        "SELECT coalesce(max(length(body)), 0) FROM idempotency_keys WHERE customer_id = '{}'",
        noisy.id
    ))?;
    report.info(
        S,
        "a bulk's kept answer (compressed, sealed)",
        format!("{kept} bytes"),
    );

    // The quiet customers' passes, while all of it goes on.
    let mut delays = Vec::new();
    for trial in 0..TRIALS {
        let customer = &quiet[trial % quiet.len()];
        let endpoint = format!("quiet-{}", trial % quiet.len());
        let before: std::collections::HashSet<String> =
            cx.receiver.seen(&endpoint).into_keys().collect();
        cluster.ingest(customer, &format!("q{trial}-"), 1)?;
        let committed = Instant::now();
        let delay = loop {
            if let Some(seen) = cx
                .receiver
                .seen(&endpoint)
                .into_iter()
                .find(|(id, _)| !before.contains(id))
            {
                break seen.1.first_at.saturating_duration_since(committed);
            }
            if committed.elapsed() > GIVE_UP {
                break committed.elapsed();
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        delays.push(delay);
        if delay > GIVE_UP {
            break;
        }
    }
    delays.sort_unstable();
    let quantile = |q: f64| {
        let rank = ((q * delays.len() as f64).ceil() as usize).clamp(1, delays.len());
        delays[rank - 1]
    };
    let (p50, p99) = (quantile(0.5), quantile(0.99));
    report.info(S, "quiet deliveries measured", delays.len());
    report.info(
        S,
        "quiet delivery delay after its pass commits, p50",
        secs(p50),
    );
    report.check(
        S,
        "quiet delivery delay after its pass commits, p99",
        secs(p99),
        "<= 5 s",
        delays.len() == TRIALS && p99 <= Duration::from_secs(5),
    );
    let samples = load.stop();
    let summary = Summary::of(&samples);
    let mut latencies: Vec<Duration> = samples.iter().map(|s| s.latency).collect();
    latencies.sort_unstable();
    let p99_read = latencies
        .get((latencies.len() * 99 / 100).min(latencies.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default();
    report.check(
        S,
        "quiet reads meanwhile, p99",
        format!(
            "{} ms ({} requests)",
            p99_read.as_millis(),
            summary.requests
        ),
        "<= 1000 ms, every one 200",
        p99_read <= Duration::from_secs(1) && summary.ok == summary.requests,
    );

    // The noisy receiver recovers: everything the bulks caused is delivered, its bodies
    // kept; then what they grew is measured.
    for name in &slow {
        cx.receiver.set(name, Behaviour::Ok);
    }
    let drain = cluster.drained(&noisy, Duration::from_secs(300))?;
    report.info(
        S,
        "noisy deliveries drained once its receiver recovered",
        secs(drain),
    );
    let most = slow
        .iter()
        .map(|n| cx.receiver.most_open(n))
        .max()
        .unwrap_or(0);
    report.check(
        S,
        "noisy deliveries in flight at once, per subscription",
        most,
        "<= 4",
        most <= 4,
    );
    let size_after = cluster.count("SELECT pg_database_size(current_database())")?;
    let grown = (size_after - size_before) as f64 / f64::from(1 << 20);
    report.check(
        S,
        "database growth of the 10 bulks, delivered to 3 subscriptions",
        format!("{grown:.1} MiB"),
        "<= 40 MiB",
        grown <= 40.0,
    );

    // Past its budgets: refused in words, never a 5xx.
    let more = send_bulks(&apis, &noisy.key, 70, "more")?;
    let refused = more.get(&429).copied().unwrap_or(0);
    let failed: usize = more
        .iter()
        .filter(|(s, _)| **s >= 500)
        .map(|(_, n)| n)
        .sum();
    report.check(
        S,
        "70 more largest bulks: refused by a budget",
        format!("{more:?}"),
        ">= 1 429, no 5xx",
        refused >= 1 && failed == 0,
    );
    Ok(())
}

/// Opens streams of the events feed: for each group of keys, `per_key` streams with each
/// key, over the instances in turn, the groups one after the other while the streams of the
/// earlier ones stay open; the statuses of each group. The streams close when the runtime
/// that opened them ends.
fn open_streams<const N: usize>(
    apis: &[String],
    groups: [(&Vec<String>, usize); N],
) -> anyhow::Result<[std::collections::BTreeMap<u16, usize>; N]> {
    block_on(async {
        let client = reqwest::Client::new();
        let mut open = Vec::new();
        let mut counted = [(); N].map(|()| std::collections::BTreeMap::new());
        for ((keys, per_key), statuses) in groups.into_iter().zip(counted.iter_mut()) {
            for key in keys {
                for n in 0..per_key {
                    let response = client
                        .get(format!("{}/api/v1/events?limit=1", apis[n % apis.len()]))
                        .bearer_auth(key)
                        .header("accept", "text/event-stream")
                        .send()
                        .await?;
                    *statuses.entry(response.status().as_u16()).or_default() += 1;
                    open.push(response);
                }
            }
        }
        drop(open);
        Ok(counted)
    })?
}

/// Sends `n` of the largest bulk triages the contract allows, over the instances in turn,
/// each with an `Idempotency-Key` of its own (its answer kept 24 hours): the statuses
/// counted. A 429 must carry the envelope and `Retry-After`.
fn send_bulks(
    apis: &[String],
    key: &str,
    n: usize,
    tag: &str,
) -> anyhow::Result<std::collections::BTreeMap<u16, usize>> {
    block_on(async {
        let client = reqwest::Client::new();
        let mut statuses = std::collections::BTreeMap::new();
        for i in 0..n {
            let first = (i * 500) % NOISY_FINDINGS;
            let ids: Vec<Value> = (first..first + 500)
                .map(|f| json!({"id": format!("n{f:06}")}))
                .collect();
            let comment = incompressible_comment(&format!("{tag}-{i}"));
            let body = json!({
                "findings": ids,
                "triage": {"state": "acknowledged", "comment": comment},
            });
            let response = client
                .post(format!("{}/api/v1/findings/triage", apis[i % apis.len()]))
                .bearer_auth(key)
                .header("idempotency-key", format!("{tag}-{i}"))
                .json(&body)
                .send()
                .await?;
            let status = response.status().as_u16();
            if status == 429 {
                anyhow::ensure!(
                    response.headers().contains_key("retry-after"),
                    "a 429 without Retry-After"
                );
                let envelope: Value = response.json().await?;
                anyhow::ensure!(
                    envelope["error"] == "rate_limited",
                    "a 429 without the envelope: {envelope}"
                );
            }
            *statuses.entry(status).or_default() += 1;
        }
        Ok(statuses)
    })?
}

/// 2,000 characters of four bytes each that do not compress (a text repeated or of few
/// letters would, and would understate what a comment costs): drawn from the
/// supplementary planes by a generator seeded with `seed`.
fn incompressible_comment(seed: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(seed.as_bytes());
    let mut state = u64::from_be_bytes(digest[..8].try_into().unwrap_or([7; 8])) | 1;
    (0..2000)
        .map(|_| {
            // xorshift64
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from_u32(0x1_0000 + (state % 0xF_0000) as u32).unwrap_or('𝒜')
        })
        .collect()
}
