//! `cargo xtask soak --minutes N`: mixed traffic for N minutes against the chaos deployment,
//! sampling what could leak every 10 s, and failing when any of it grows.
//!
//! Traffic: reads of every list on both instances (six keys), a key sent far past its rate
//! limit (429), an unknown key (401), a key without the scope (403), an NDJSON export every
//! 5 s, and an analyzer pass every minute whose deliveries go to five subscriptions.
//! Samples: each process's resident memory and open file descriptors, posture's PostgreSQL
//! connections, Redis's `used_memory`, pending deliveries, for N minutes after a warm-up (a
//! tenth of N, at least 30 s, with a pass every 10 s, and on until both workers have
//! delivered, at most 3 minutes). The rule: the mean of the last third
//! of the samples may exceed the mean of the first third by at most 10 % plus a small
//! allowance per measure, or, when it stepped up once (a process whose first work came
//! after the warm-up), stay level after the step, within half that, for more than a third
//! of the run. Any 5xx, request without a response, failed pass or failed
//! delivery fails the soak too.

use std::{
    collections::BTreeMap,
    process::Command,
    time::{Duration, Instant},
};

use clap::Args;
use serde_json::json;

use super::{
    Context, EVERY_EVENT,
    cluster::{Cluster, Customer, ROLE},
    receiver::Receiver,
    traffic::{Load, PATHS, Sample, Spec, Summary},
};
use crate::{binaries::build_binaries_as, files::project_root, process::eprintln_status};

#[derive(Args, Debug)]
pub struct SoakArgs {
    /// How long to run.
    #[arg(long, default_value_t = 30)]
    minutes: u64,
    /// Run optimised binaries (`cargo build --release`), as deployed.
    #[arg(long)]
    release: bool,
}

const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// The longest warm-up while waiting for both workers' first deliveries.
const WARM_UP_LIMIT: Duration = Duration::from_secs(180);

/// A measure sampled over the run and its allowance over the first third's mean.
struct Series {
    name: String,
    unit: &'static str,
    allowance: f64,
    values: Vec<f64>,
}

/// `VmRSS` (MiB) and open descriptors of a process.
fn process_sample(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some((rss_kib / 1024.0, fds as f64))
}

fn redis_used_memory(url: &str) -> Option<f64> {
    let out = Command::new("redis-cli")
        .args(["-u", url, "INFO", "memory"])
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let bytes: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))?
        .trim()
        .parse()
        .ok()?;
    Some(bytes / 1024.0 / 1024.0)
}

/// The series sampled over the run, by name.
type Sampled = BTreeMap<String, Series>;

/// Adds `value` to the series `name` (made with its unit and allowance when new).
fn record(series: &mut Sampled, name: String, unit: &'static str, allowance: f64, value: f64) {
    series
        .entry(name.clone())
        .or_insert(Series {
            name,
            unit,
            allowance,
            values: Vec::new(),
        })
        .values
        .push(value);
}

/// The traffic of the run, on every instance in `bases`: readers under their limit, a
/// hammer over it, an unknown key, a key lacking the scope, and an export every 5 s.
fn traffic(
    cluster: &Cluster,
    cx: &Context,
    bases: &[String],
) -> anyhow::Result<(Vec<Load>, Customer)> {
    let readers: Vec<String> = (0..6)
        .map(|i| cluster.reader(&format!("soak{i}")).map(|c| c.key))
        .collect::<anyhow::Result<_>>()?;
    let hammer = cluster.customer("Soak hammer")?.key;
    let passes = cluster.customer("Soak passes")?;
    for i in 0..5 {
        cx.subscribe(&passes, &format!("soak-{i}"), EVERY_EVENT)?;
    }
    let narrow = cluster.cli(&[
        "keys",
        "issue",
        "--customer",
        &passes.id,
        "--scope",
        "read:roles",
    ])?["key"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let unknown = "svc_0000000000000000000000000000000000000000".to_owned();
    let specs = [
        Spec {
            instances: bases,
            keys: &readers,
            tasks: 3,
            pause: Duration::from_millis(20),
            paths: PATHS,
        },
        Spec {
            instances: &bases[..1],
            keys: std::slice::from_ref(&hammer),
            tasks: 1,
            pause: Duration::ZERO,
            paths: &["/api/v1/tenants"],
        },
        Spec {
            instances: bases,
            keys: std::slice::from_ref(&unknown),
            tasks: 1,
            pause: Duration::from_millis(250),
            paths: &["/api/v1/findings"],
        },
        Spec {
            instances: bases,
            keys: std::slice::from_ref(&narrow),
            tasks: 1,
            pause: Duration::from_millis(250),
            paths: &["/api/v1/findings"],
        },
        Spec {
            instances: bases,
            keys: &readers[..1],
            tasks: 1,
            pause: Duration::from_secs(5),
            paths: &["/api/v1/findings/export"],
        },
    ];
    Ok((specs.iter().map(Load::spec).collect(), passes))
}

/// The passes of the run: how many were sent and how many failed.
#[derive(Default)]
struct Passes {
    sent: u32,
    failed: u32,
}

impl Passes {
    /// One pass of 400 findings for `customer`, its ids prefixed by `tag` and its number.
    fn send(&mut self, cluster: &Cluster, customer: &Customer, tag: &str) {
        let prefix = format!("{tag}{}-", self.sent);
        if cluster.ingest(customer, &prefix, 400).is_err() {
            self.failed += 1;
        }
        self.sent += 1;
    }
}

/// Warm-up, not sampled: caches, pools and allocators of every process reach their
/// working size. Passes every 10 s, and on until both workers have delivered (one may claim
/// every delivery of a small pass; the other's first ones would show as a step of its
/// memory), for at most [`WARM_UP_LIMIT`].
fn warm_up(cluster: &Cluster, customer: &Customer, passes: &mut Passes, total: Duration) {
    let started = Instant::now();
    let warm_up = (total / 10).max(Duration::from_secs(30));
    eprintln_status(&format!("soak: {} s of warm-up", warm_up.as_secs()));
    let idle_worker = || (0..2).any(|i| cluster.worker_attempts(i) == Some(0.0));
    while started.elapsed() < warm_up || (started.elapsed() < WARM_UP_LIMIT && idle_worker()) {
        passes.send(cluster, customer, "w");
        std::thread::sleep(Duration::from_secs(10));
    }
    let attempts: Vec<String> = (0..2)
        .map(|i| match cluster.worker_attempts(i) {
            Some(n) => format!("worker-{i} {n}"),
            None => format!("worker-{i} unknown (no metrics)"),
        })
        .collect();
    eprintln_status(&format!(
        "soak: {} minutes sampled after {} s of warm-up (delivery attempts: {})",
        total.as_secs() / 60,
        started.elapsed().as_secs(),
        attempts.join(", ")
    ));
}

/// One sample of every process's memory and descriptors, posture's connections, Redis's
/// memory and the deliveries pending.
fn sample(cluster: &Cluster, series: &mut Sampled) {
    for (name, pid) in cluster.pids() {
        if let Some((rss, fds)) = process_sample(pid) {
            record(series, format!("{name} resident memory"), "MiB", 8.0, rss);
            record(series, format!("{name} open descriptors"), "", 8.0, fds);
        }
    }
    let connections = format!("SELECT count(*) FROM pg_stat_activity WHERE usename = '{ROLE}'");
    if let Ok(n) = cluster.count(&connections) {
        let name = "PostgreSQL connections of posture".into();
        record(series, name, "", 2.0, n as f64);
    }
    if let Some(mib) = redis_used_memory(&cluster.redis.url()) {
        record(series, "Redis used_memory".into(), "MiB", 1.0, mib);
    }
    let pending = "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'";
    if let Ok(n) = cluster.count(pending) {
        record(series, "pending deliveries".into(), "", 100.0, n as f64);
    }
}

pub fn run_soak(args: &SoakArgs) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let bin = build_binaries_as(args.release)?;
    // 1,000 requests per key per 10 s: the readers stay under it, the hammer does not.
    let cluster = Cluster::with_rate_limit(bin, 1000, 10)?;
    let receiver = Receiver::default();
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let hook_base = format!("http://{}", listener.local_addr()?);
    let _serving = receiver.serve(listener)?;
    let bases = cluster.bases();
    let cx = Context {
        receiver,
        hook_base,
        api: bases[0].clone(),
    };
    let (loads, customer) = traffic(&cluster, &cx, &bases)?;

    let total = Duration::from_secs(args.minutes * 60);
    let mut passes = Passes::default();
    warm_up(&cluster, &customer, &mut passes, total);
    let mut series = Sampled::new();
    let started = Instant::now();
    let mut next_pass = Duration::ZERO;
    while started.elapsed() < total {
        if started.elapsed() >= next_pass {
            passes.send(&cluster, &customer, "p");
            next_pass += Duration::from_secs(60);
        }
        sample(&cluster, &mut series);
        std::thread::sleep(SAMPLE_EVERY);
    }
    let samples: Vec<Sample> = loads.into_iter().flat_map(Load::stop).collect();
    let traffic = Summary::of(&samples);
    let delivered = cluster.outbox(&customer)?;
    let seconds = started.elapsed().as_secs_f64();
    write_report(
        (args.minutes, args.release),
        seconds,
        &series,
        &traffic,
        (passes.sent, passes.failed, delivered),
    )
}

/// How a series fared.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// The last third is within the bound over the first.
    Flat,
    /// Over the bound, but it rose in one step and stayed level after it for more than a
    /// third of the run, within half the bound's slack (a process that took its first work
    /// after the warm-up, e.g. the second worker's first deliveries). A steady leak keeps
    /// rising after its largest step, and a step in the last third is too late to show a
    /// level, so both still fail.
    Stepped,
    Grew,
}

/// The verdict of one series (sampled after the warm-up): (first third's mean, last
/// third's mean, verdict).
fn verdict(values: &[f64], allowance: f64) -> Option<(f64, f64, Verdict)> {
    let third = values.len() / 3;
    if third == 0 {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let first = mean(&values[..third]);
    let last = mean(&values[values.len() - third..]);
    let slack = first * 0.10 + allowance;
    let verdict = if last <= first + slack {
        Verdict::Flat
    } else if level_after_step(values, third, slack / 2.0) {
        Verdict::Stepped
    } else {
        Verdict::Grew
    };
    Some((first, last, verdict))
}

/// Whether the samples from the series' largest rise on span more than `third` samples and
/// stay within `tolerance` of the first of them.
fn level_after_step(values: &[f64], third: usize, tolerance: f64) -> bool {
    let Some(step) = (1..values.len())
        .max_by(|&a, &b| (values[a] - values[a - 1]).total_cmp(&(values[b] - values[b - 1])))
    else {
        return false;
    };
    let after = &values[step..];
    after.len() > third && after.iter().all(|v| (v - after[0]).abs() <= tolerance)
}

/// The least-squares slope of samples taken every [`SAMPLE_EVERY`], per hour (reported,
/// not judged: memory saw-tooths, and a slope over minutes says little on its own).
fn per_hour(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    let hours = |i: usize| i as f64 * SAMPLE_EVERY.as_secs_f64() / 3600.0;
    let mean_x = (0..values.len()).map(hours).sum::<f64>() / n;
    let mean_y = values.iter().sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (i, y) in values.iter().enumerate() {
        num += (hours(i) - mean_x) * (y - mean_y);
        den += (hours(i) - mean_x).powi(2);
    }
    if den > 0.0 { num / den } else { 0.0 }
}

fn write_report(
    (minutes, release): (u64, bool),
    seconds: f64,
    series: &BTreeMap<String, Series>,
    traffic: &Summary,
    (passes, passes_failed, (pending, delivered, failed)): (u32, u32, (i64, i64, i64)),
) -> anyhow::Result<()> {
    let reasons: String = traffic
        .why_no_response
        .iter()
        .map(|(why, count)| format!("- without a response ×{count}: {why}\n"))
        .collect();
    let mut table = format!(
        "Soak of {minutes} min ({} binaries): {} requests, statuses {:?}, {} without a response; {passes} passes ({passes_failed} failed), deliveries {delivered} delivered, {pending} pending, {failed} failed\n\n{reasons}{}| measure | min | max | first third | last third | fitted trend | bound | |\n|---|---|---|---|---|---|---|---|\n",
        if release { "release" } else { "debug" },
        traffic.requests,
        traffic.statuses,
        traffic.no_response,
        if reasons.is_empty() { "" } else { "\n" },
    );
    let server_errors: usize = traffic.statuses.range(500..).map(|(_, n)| n).sum();
    let mut failures = usize::from(
        passes_failed > 0 || failed > 0 || traffic.no_response > 0 || server_errors > 0,
    );
    let mut rows = Vec::new();
    for s in series.values() {
        let Some((first, last, verdict)) = verdict(&s.values, s.allowance) else {
            continue;
        };
        let ok = verdict != Verdict::Grew;
        failures += usize::from(!ok);
        let (min, max) = s
            .values
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
        let trend = per_hour(&s.values);
        table.push_str(&format!(
            "| {} | {min:.1} | {max:.1} | {first:.1} {unit} | {last:.1} {unit} | {trend:+.1} {unit}/h | ≤ first × 1.1 + {} | {} |\n",
            s.name,
            s.allowance,
            match verdict {
                Verdict::Flat => "ok",
                Verdict::Stepped => "ok (stepped up once, then level)",
                Verdict::Grew => "GREW",
            },
            unit = s.unit
        ));
        rows.push(
            json!({"measure": s.name, "unit": s.unit, "firstThird": first, "lastThird": last,
                         "allowance": s.allowance, "pass": ok, "samples": s.values}),
        );
    }
    std::io::Write::write_all(&mut std::io::stdout(), table.as_bytes())?;
    let dir = project_root().join("target").join("soak");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("report.md"), &table)?;
    let report = json!({"minutes": minutes, "release": release, "seconds": seconds, "requests": traffic.requests,
        "statuses": traffic.statuses, "noResponse": traffic.no_response,
        "withoutResponse": traffic.why_no_response, "passes": passes,
        "passesFailed": passes_failed, "deliveries": {"delivered": delivered, "pending": pending, "failed": failed},
        "series": rows, "failures": failures});
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&report)?)?;
    anyhow::ensure!(
        failures == 0,
        "{failures} soak checks failed (target/soak/report.md)"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(values: &[f64]) -> Verdict {
        verdict(values, 8.0).unwrap().2
    }

    #[test]
    fn a_level_series_is_flat() {
        assert!(judged(&[40.0; 12]) == Verdict::Flat);
    }

    #[test]
    fn a_step_then_a_level_is_not_a_leak() {
        // The second worker of a CI soak: idle at first, then at its working size.
        let values = [
            26.9, 26.9, 26.9, 26.9, 43.4, 43.4, 43.4, 43.4, 43.4, 43.4, 43.4, 43.4,
        ];
        assert!(judged(&values) == Verdict::Stepped);
    }

    #[test]
    fn a_step_late_in_the_middle_third_then_a_level_is_not_a_leak() {
        // worker-0 of a CI soak (31.4 to 42.5 MiB there, over its bound by 0.005): its first
        // deliveries came at the seventh sample.
        let values = [
            31.4, 31.4, 31.4, 31.4, 31.4, 31.4, 32.3, 43.5, 43.5, 43.5, 43.5, 43.5,
        ];
        assert!(judged(&values) == Verdict::Stepped);
    }

    #[test]
    fn a_step_followed_by_more_growth_fails() {
        let values = [
            30.0, 30.0, 30.0, 30.0, 40.0, 41.5, 43.0, 44.5, 46.0, 47.5, 49.0, 50.5,
        ];
        assert!(judged(&values) == Verdict::Grew);
    }

    #[test]
    fn a_steady_leak_over_the_bound_fails() {
        // 40 MiB growing 2 MiB a sample: +16 MiB from the first third to the last, over
        // the bound of 12.3.
        let values: Vec<f64> = (0..12).map(|i| 40.0 + 2.0 * f64::from(i)).collect();
        assert!(judged(&values) == Verdict::Grew);
    }

    #[test]
    fn a_late_step_fails() {
        let values = [
            30.0, 30.0, 30.0, 30.0, 30.0, 30.0, 30.0, 30.0, 50.0, 50.0, 50.0, 50.0,
        ];
        assert!(judged(&values) == Verdict::Grew);
    }
}
