//! `cargo xtask chaos`: faults injected while traffic flows, each measured against what
//! posture promises (docs/reliability.md).
//!
//! Starts a throwaway PostgreSQL (60 connections) and Redis, two `posture-api` instances
//! sharing the Redis (the second reaches PostgreSQL through a proxy that can freeze a
//! connection) and two `posture-worker`s with short retry, lease and timeout settings, and
//! a webhook receiver of its own. The failover scenarios start Patroni clusters, and the
//! Citus ones a coordinator and workers, of their own. Then runs each scenario in turn, prints a table and
//! writes `target/chaos/report.{md,json}`; fails when a promise was broken. Processes' logs
//! are in `target/xtask/chaos-logs/`.

mod citus;
mod citus_ha;
mod citus_ha_checks;
mod cluster;
mod cluster_rows;
mod context;
mod deliveries;
mod failover;
mod neighbours;
mod outages;
mod patroni;
mod receiver;
mod report;
mod restarts;
mod runtime;
mod scim_users;
pub mod soak;
mod subscriptions;
mod traffic;
mod triages;
mod writers;

use std::{net::TcpListener, time::Instant};

use anyhow::bail;
use clap::Args;

use crate::{binaries::build_binaries_as, files::project_root, process::eprintln_status};
use cluster::Cluster;
pub use context::{Context, EVERY_EVENT};
use receiver::Receiver;
use report::Report;
pub use runtime::block_on;

/// The scenarios, in the order they run.
const SCENARIOS: &[&str] = &[
    "workers",
    "receivers",
    "postgres",
    "connections",
    "redis",
    "listen",
    "sigterm",
    "neighbours",
    "failover",
    "switchover",
    "failover-sync",
    "citus-node",
    "citus-rebalance",
    "citus-switchover",
    "citus-worker-failover",
    "citus-coordinator-failover",
];

/// The scenarios on Citus (`--citus`).
const CITUS: &[&str] = &[
    "citus-node",
    "citus-rebalance",
    "citus-switchover",
    "citus-worker-failover",
    "citus-coordinator-failover",
];

#[derive(Args, Debug)]
pub struct ChaosArgs {
    /// Run only these scenarios (comma-separated): workers, receivers, postgres,
    /// connections, redis, listen, sigterm, neighbours, failover, switchover,
    /// failover-sync, citus-node, citus-rebalance, citus-switchover,
    /// citus-worker-failover, citus-coordinator-failover.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Run the Citus scenarios only (with `--only`, those of them it names).
    #[arg(long)]
    citus: bool,
    /// Runs of each failover scenario (each on a new Patroni cluster, about a minute; the
    /// Citus ones one after another on one cluster).
    #[arg(long, default_value_t = 1)]
    failover_runs: usize,
    /// Run optimised binaries (`cargo build --release`), as deployed.
    #[arg(long)]
    release: bool,
    /// Run the binaries of this directory (`posture-api`, `posture-worker`) instead of
    /// building them: another release's, to compare it with this one.
    #[arg(long, value_name = "DIR")]
    binaries: Option<std::path::PathBuf>,
}

pub fn run(args: &ChaosArgs) -> anyhow::Result<()> {
    for name in &args.only {
        if !SCENARIOS.contains(&name.as_str()) {
            bail!(
                "unknown scenario {name:?}; the scenarios are {}",
                SCENARIOS.join(", ")
            );
        }
    }
    let selected: Vec<&str> = SCENARIOS
        .iter()
        .copied()
        .filter(|name| args.only.is_empty() || args.only.iter().any(|o| o == name))
        .filter(|name| !args.citus || CITUS.contains(name))
        .collect();
    if selected.is_empty() {
        bail!(
            "no scenario selected: --citus runs only {}",
            CITUS.join(", ")
        );
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let started = Instant::now();
    let bin = match &args.binaries {
        Some(dir) => std::fs::canonicalize(dir)?,
        None => build_binaries_as(args.release)?,
    };
    let mut cluster = Cluster::start(bin)?;
    let receiver = Receiver::default();
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let hook_base = format!("http://{}", listener.local_addr()?);
    let _serving = receiver.serve(listener)?;
    let cx = Context {
        receiver,
        hook_base,
        api: cluster.bases()[0].clone(),
    };
    let mut report = Report::default();
    // The Patroni Citus cluster of the high-availability scenarios, started by the first.
    let mut ha: Option<citus_ha::Ha> = None;
    for &name in &selected {
        eprintln_status(&format!("chaos: scenario {name}"));
        let outcome = match name {
            "workers" => deliveries::workers_killed(&mut cluster, &cx, &mut report),
            "receivers" => deliveries::receiver_faults(&mut cluster, &cx, &mut report),
            "postgres" => outages::postgres_down(&mut cluster, &cx, &mut report),
            "connections" => outages::connections_exhausted(&mut cluster, &mut report),
            "redis" => outages::redis_down(&mut cluster, &mut report),
            "listen" => restarts::listen_lost(&mut cluster, &mut report),
            "failover" | "switchover" | "failover-sync" => {
                let (loss, synchronous) = match name {
                    "failover" => (failover::Loss::Killed, false),
                    "switchover" => (failover::Loss::Switchover, false),
                    _ => (failover::Loss::Killed, true),
                };
                (0..args.failover_runs).try_for_each(|run| {
                    let how = failover::How {
                        loss,
                        synchronous,
                        run,
                    };
                    failover::run(&cluster.bin, &cx, how, scenario_label(name), &mut report)
                })
            }
            "citus-node" => citus::node_lost(&cluster.bin, &cx, &mut report),
            "citus-rebalance" => citus::rebalance(&cluster.bin, &cx, &mut report),
            "citus-switchover" | "citus-worker-failover" | "citus-coordinator-failover" => {
                let label = scenario_label(name);
                let started = match ha.as_mut() {
                    Some(ha) => Ok(ha),
                    None => citus_ha::Ha::start(&cluster.bin, &cx).map(|h| ha.insert(h)),
                };
                let outcome = started.and_then(|ha| {
                    (0..args.failover_runs).try_for_each(|run| match name {
                        "citus-switchover" => citus_ha::worker_group(
                            ha,
                            &cx,
                            failover::Loss::Switchover,
                            (label, run),
                            &mut report,
                        ),
                        "citus-worker-failover" => citus_ha::worker_group(
                            ha,
                            &cx,
                            failover::Loss::Killed,
                            (label, run),
                            &mut report,
                        ),
                        _ => citus_ha::coordinator(ha, &cx, (label, run), &mut report),
                    })
                });
                // A scenario cut short may leave a node down: the next starts a new cluster.
                if outcome.is_err() {
                    ha = None;
                }
                outcome
            }
            "neighbours" => neighbours::run(&mut cluster, &cx, &mut report),
            "sigterm" => restarts::api_sigterm(&mut cluster, &mut report),
            _ => unreachable!("the scenarios are checked above"),
        };
        if let Err(e) = outcome {
            report.aborted(scenario_label(name), &e);
        }
    }
    let dir = project_root().join("target").join("chaos");
    std::fs::create_dir_all(&dir)?;
    report.write(&dir, started.elapsed().as_secs_f64())?;
    match report.failures() {
        0 => Ok(()),
        n => {
            print_posture_errors();
            bail!(
                "{n} chaos checks failed (target/chaos/report.md; logs in target/xtask/chaos-logs/)"
            )
        }
    }
}

/// The ERROR lines posture's instances logged (the first [`SHOWN`]), printed when a check
/// failed: a CI log is often all that is left of a run.
fn print_posture_errors() {
    const SHOWN: usize = 40;
    let Ok(logs) = crate::files::scratch_dir("chaos-logs") else {
        return;
    };
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&logs)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|kind| {
            std::fs::read_dir(kind.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.ends_with(".log") && (n.starts_with("api-") || n.starts_with("worker-"))
            })
        })
        .collect();
    files.sort();
    let mut shown = 0;
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for line in text.lines().filter(|l| l.contains(" ERROR ")) {
            if shown == SHOWN {
                return;
            }
            eprintln_status(&format!("{}: {line}", path.display()));
            shown += 1;
        }
    }
}

fn scenario_label(name: &str) -> &'static str {
    SCENARIOS
        .iter()
        .find(|s| **s == name)
        .copied()
        .unwrap_or("chaos")
}
