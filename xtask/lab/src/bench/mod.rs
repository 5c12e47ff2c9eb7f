//! `cargo xtask bench`: posture's performance, measured end to end on this machine.
//!
//! Builds release binaries, starts a throwaway PostgreSQL tuned like a small server, loads
//! demo data (1,000,000 findings over 200 customers, one with 200,000, by default) through the
//! real `posture-api ingest`, serves it with the release `posture-api`, and drives HTTP load
//! with `wrk` (Debian package `wrk`) and SQL load with `pgbench`. Every figure is printed as
//! one table and written to `target/bench/<timestamp>.json` as an array of
//! `{figure, value, unit, baseline, baseline_name, ratio, target, lower_is_better}`.
//! `sync.rs` measures keeping in sync (a deep cursor page, a sync loop after a steady-state
//! pass that changed 1% of the largest customer's findings).

mod args;
mod citus;
mod citus_sql;
mod cli;
mod compression;
mod cpu;
mod deliveries;
mod delivery_log;
mod events;
mod export;
mod floor;
mod floor_server;
mod http;
mod limiter;
mod listen;
mod load;
mod oauth;
mod one_node;
mod peer;
mod record_use;
mod report;
mod scale;
mod scale_out;
mod scenarios;
mod scheduler;
mod sizes;
mod sql;
mod sync;

use std::time::Duration;

use anyhow::Context as _;

use crate::{
    files::scratch_dir,
    gen_data::GenDataArgs,
    process::{eprintln_status, on_path},
};

pub use args::BenchArgs;
pub use floor::FloorArgs;
pub use report::Figure;

/// PostgreSQL settings of the benchmark server (a small dedicated server's, scaled down).
pub(super) const PG_SETTINGS: &str = "-c shared_buffers=1GB -c max_wal_size=4GB -c maintenance_work_mem=256MB \
                           -c work_mem=16MB -c effective_cache_size=4GB -c random_page_cost=1.1";

fn require(program: &str, package: &str) -> anyhow::Result<()> {
    if on_path(program).is_none() {
        anyhow::bail!(
            "{program} was not found: install it (Debian/Ubuntu: apt-get install -y {package})"
        );
    }
    Ok(())
}

/// Runs the benchmark; the report holds every figure measured, also when a scenario failed
/// (then its name ends in `-partial`, and the failure is the task's error).
pub fn run_bench(args: &BenchArgs) -> anyhow::Result<()> {
    // Once, for every HTTP client of the run (reqwest is built without a default provider).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = args.at_smoke_size();
    let mut figures = Vec::new();
    let measured = measure(&args, &mut figures);
    if let Err(e) = &measured {
        if figures.is_empty() {
            return measured;
        }
        eprintln_status(&format!(
            "a scenario failed ({e:#}): the {} figures measured before it are written",
            figures.len()
        ));
    }
    finish(&figures, measured.is_err())?;
    measured
}

fn measure(args: &BenchArgs, figures: &mut Vec<Figure>) -> anyhow::Result<()> {
    if args.resets_only {
        limiter::reset_spread(figures);
        return Ok(());
    }
    require("wrk", "wrk")?;
    require("pgbench", "postgresql-contrib")?;
    // The database client's floor (floor.rs) is measured optimised too (but by a smoke run).
    let bin_dir = crate::binaries::build_binaries_with(!args.smoke, &["posture-lab"])?;
    let bin = bin_dir.join("posture-api");
    let _scheduler = scheduler::OneGroup::for_the_run();
    if args.scale {
        scale::run(
            &bin,
            &args.scale_sizes,
            Duration::from_secs(args.seconds),
            args.pool_size,
            figures,
        )?;
        return Ok(());
    }
    if args.events_only {
        let postgres = crate::servers::postgres("bench-postgres", PG_SETTINGS)?;
        load::api(&bin, &postgres.url, &["migrate"])?;
        let server = http::Server::start(&bin, &postgres.url, None, args.pool_size)?;
        events::run(
            &bin,
            &server,
            &postgres.url,
            args.events_waiters,
            &args.event_sizes,
            Duration::from_secs(args.seconds),
            figures,
        )?;
        drop(server);
        return Ok(());
    }

    let data = GenDataArgs {
        out: scratch_dir(&format!(
            "bench-data-{}-{}-{}",
            args.customers, args.findings, args.largest
        ))?,
        customers: args.customers,
        findings: args.findings,
        largest: args.largest,
        identities: 500,
        upr_days: 0,
    };
    if args.citus {
        citus::run(
            &bin,
            &data,
            args.pool_size,
            Duration::from_secs(args.seconds),
            figures,
        )?;
        return Ok(());
    }
    let postgres = crate::servers::postgres("bench-postgres", PG_SETTINGS)?;
    let loaded = load::load(&bin, &postgres.url, &data, figures)?;
    let server = http::Server::start(&bin, &postgres.url, None, args.pool_size)?;
    let run = one_node::OnOneNode {
        args,
        bin_dir: &bin_dir,
        bin: &bin,
        postmaster: cpu::postmaster_pid(&postgres.data_dir())?,
        postgres: &postgres,
        server: &server,
        loaded: &loaded,
        ingest: sync::Ingest {
            bin: &bin,
            database_url: &postgres.url,
            data_dir: &data.out,
        },
        duration: Duration::from_secs(args.seconds),
    };
    if run.focused(figures)? {
        return Ok(());
    }
    let in_process = run.everything(figures)?;
    // Alone on the machine, as every other server was measured.
    drop(server);
    one_node::through_redis(
        &bin,
        &postgres.url,
        args.pool_size,
        &loaded,
        Duration::from_secs(args.seconds),
        in_process,
        figures,
    )
}

/// Writes the report and prints it.
fn finish(figures: &[Figure], partial: bool) -> anyhow::Result<()> {
    let path = report::write(figures, partial).context("writing the report")?;
    report::print(figures);
    eprintln_status(&format!("figures written to {}", path.display()));
    Ok(())
}

/// `posture-lab bench-floor` (hidden, run by the bench from the release build): the
/// database client's floor, or with `--serve` the floor's server.
pub fn run_floor(args: &FloorArgs) -> anyhow::Result<()> {
    match args.serve {
        Some(port) => floor_server::serve(&args.url, &args.customer, port),
        None => floor::run_client(args),
    }
}
