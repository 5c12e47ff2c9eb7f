//! `cargo xtask bench --citus`: the same data on one PostgreSQL node and on a Citus
//! coordinator with two workers, on the same machine: the small customer's findings list
//! and a finding's detail, a pass of 200,000 new findings and its fan-out to 25
//! subscriptions; the time `posture-api migrate` takes to distribute the single-node data
//! in place; how the customers and the bytes spread over the nodes.
//!
//! On shared cores a ratio below 1 is what to expect: every statement takes one more hop
//! (the coordinator plans it and a worker runs it), and the nodes share the same CPUs;
//! what Citus adds is machines, which one machine cannot show. So beside throughput it
//! reports what a request costs: the CPU time of `posture-api` and of every PostgreSQL
//! node (each postmaster and its backends, live or exited) per request served, and the
//! database CPU of the pass, on Citus against one node.

use std::{path::Path, time::Duration, time::Instant};

use anyhow::Context as _;

use super::{
    PG_SETTINGS, citus_sql, cpu,
    deliveries::{fan_out_customer, subscribe},
    http::{self, Server},
    load::{self, Loaded},
    report::Figure,
};
use crate::{
    demo_data::write_new_findings_pass, files::scratch_dir, gen_data::GenDataArgs,
    process::psql_value,
};

/// New findings of the measured pass.
const PASS_FINDINGS: usize = 200_000;
/// Shards per distributed table: Citus's default.
const SHARDS: &str = "-c citus.shard_count=32";

/// What one deployment measured.
struct Measured {
    list: http::Load,
    detail: http::Load,
    /// CPU microseconds per request: (posture-api, every PostgreSQL node).
    list_cpu: (f64, f64),
    detail_cpu: (f64, f64),
    pass_secs: f64,
    /// CPU seconds of every PostgreSQL node over the pass.
    pass_database_cpu: f64,
    fan_out_ms: f64,
    queued: u64,
}

/// CPU seconds of posture-api (`api`) and of every PostgreSQL node, summed.
fn cpu_seconds(api: Option<u32>, postmasters: &[u32]) -> anyhow::Result<(f64, f64)> {
    let mut database = 0.0;
    for postmaster in postmasters {
        database += cpu::cluster_seconds(*postmaster)?;
    }
    Ok((api.map_or(Ok(0.0), cpu::process_seconds)?, database))
}

/// `wrk` against `url`, and the CPU microseconds per request it cost posture-api and every
/// node.
fn wrk_costed(
    server: &Server,
    postmasters: &[u32],
    url: &str,
    key: &str,
    connections: u32,
    duration: Duration,
) -> anyhow::Result<(http::Load, (f64, f64))> {
    let before = cpu_seconds(Some(server.pid()), postmasters)?;
    let load = http::wrk(url, key, connections, duration)?;
    let after = cpu_seconds(Some(server.pid()), postmasters)?;
    let requests = (load.requests_per_second * duration.as_secs_f64()).max(1.0);
    let per = |now: f64, then: f64| (now - then).max(0.0) * 1e6 / requests;
    Ok((load, (per(after.0, before.0), per(after.1, before.1))))
}

/// The list and the detail under `connections`, then the pass, on the nodes whose
/// postmasters are `postmasters`.
fn measure(
    bin: &Path,
    url: &str,
    postmasters: &[u32],
    loaded: &Loaded,
    pool_size: Option<u32>,
    connections: u32,
    duration: Duration,
) -> anyhow::Result<Measured> {
    let server = Server::start(bin, url, None, pool_size)?;
    let (list, list_cpu) = wrk_costed(
        &server,
        postmasters,
        &format!(
            "{}/api/v1/findings?severity=critical,high&status=open&limit=100&offset=0",
            server.base
        ),
        &loaded.small.key,
        connections,
        duration,
    )?;
    let detail_id = http::detail_id(url, loaded)?;
    let (detail, detail_cpu) = wrk_costed(
        &server,
        postmasters,
        &format!("{}/api/v1/findings/{detail_id}", server.base),
        &loaded.largest.key,
        connections,
        duration,
    )?;
    let (id, key) = fan_out_customer(bin, url)?;
    subscribe(&server.base, &key, "https://receiver.example/hook")?;
    drop(server);
    let file = scratch_dir("bench-citus-pass")?.join("pass.jsonl");
    write_new_findings_pass(
        &file,
        "4c1f0b7c-2d3e-4c1a-9f57-6a1d2b3c4d5e",
        "p",
        PASS_FINDINGS,
    )?;
    let started = Instant::now();
    let before = cpu_seconds(None, postmasters)?.1;
    let pass = load::api(
        bin,
        url,
        &["ingest", "--customer", &id, file.to_str().context("path")?],
    )?;
    Ok(Measured {
        list,
        detail,
        list_cpu,
        detail_cpu,
        pass_database_cpu: cpu_seconds(None, postmasters)?.1 - before,
        pass_secs: started.elapsed().as_secs_f64(),
        fan_out_ms: pass["fanOutMs"].as_f64().unwrap_or(f64::NAN),
        queued: pass["deliveriesQueued"].as_u64().unwrap_or(0),
    })
}

/// Runs it; `figures` gets each figure on Citus against the same on one node.
pub fn run(
    bin: &Path,
    data: &GenDataArgs,
    pool_size: Option<u32>,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let connections = 16;
    let one = {
        let single = crate::servers::postgres("bench-postgres", PG_SETTINGS)?;
        let loaded = load::load(bin, &single.url, data, &mut Vec::new())?;
        let postmaster = cpu::postmaster_pid(&single.data_dir())?;
        let statements = citus_sql::cost(&single.url, &loaded.small.id, &[postmaster], duration)?;
        let measured = measure(
            bin,
            &single.url,
            &[postmaster],
            &loaded,
            pool_size,
            connections,
            duration,
        )?;
        (measured, statements)
    };
    let (one, one_statements) = one;

    // The same data on the coordinator alone, then moved onto the workers in place.
    let cluster = crate::servers::citus("bench-citus", 2, &format!("{PG_SETTINGS} {SHARDS}"))?;
    let coordinator = &cluster.coordinator;
    let loaded = load::load(bin, &coordinator.url, data, &mut Vec::new())?;
    crate::servers::citus_join(&cluster)?;
    let findings = psql_value(&coordinator.url, "SELECT count(*) FROM findings")?;
    let started = Instant::now();
    load::api(bin, &coordinator.url, &["migrate"])?;
    let moved = started.elapsed().as_secs_f64();
    figures.push(Figure::measure(
        format!(
            "posture-api migrate distributing the single-node data in place ({findings} findings, 200 customers, 2 workers, 32 shards a table)"
        ),
        moved,
        "s",
        true,
    ));
    psql_value(&coordinator.url, "VACUUM ANALYZE")?;
    spread(&coordinator.url, figures)?;
    let postmasters = std::iter::once(coordinator)
        .chain(&cluster.workers)
        .map(|node| cpu::postmaster_pid(&node.data_dir()))
        .collect::<anyhow::Result<Vec<u32>>>()?;
    // The list's statements through the coordinator, and on the worker holding the
    // customer's shards.
    let through = citus_sql::cost(&coordinator.url, &loaded.small.id, &postmasters, duration)?;
    let port: u16 = psql_value(
        &coordinator.url,
        &format!(
            "SELECT nodeport FROM pg_dist_shard_placement \
             WHERE shardid = get_shard_id_for_distribution_column('findings', '{}')",
            loaded.small.id
        ),
    )?
    .parse()?;
    let holder = cluster
        .workers
        .iter()
        .find(|w| w.port() == port)
        .context("the worker holding the small customer")?;
    let local = citus_sql::cost(&holder.url, &loaded.small.id, &postmasters, duration)?;
    citus_sql::figures(&one_statements, &through, &local, figures);
    let citus = measure(
        bin,
        &coordinator.url,
        &postmasters,
        &loaded,
        pool_size,
        connections,
        duration,
    )?;

    let against = |name: &str, unit: &str, on: f64, single: f64, lower: bool| {
        Figure::measure(format!("{name}, Citus (2 workers)"), on, unit, lower).against(
            single,
            "one PostgreSQL node, same machine and data",
            None,
        )
    };
    figures.push(against(
        &format!("small-customer findings list, {connections} conn: throughput"),
        "req/s",
        citus.list.requests_per_second,
        one.list.requests_per_second,
        false,
    ));
    figures.push(against(
        "small-customer findings list: p99",
        "ms",
        citus.list.p99_ms,
        one.list.p99_ms,
        true,
    ));
    figures.push(against(
        &format!("finding detail, {connections} conn: throughput"),
        "req/s",
        citus.detail.requests_per_second,
        one.detail.requests_per_second,
        false,
    ));
    figures.push(against(
        "finding detail: p99",
        "ms",
        citus.detail.p99_ms,
        one.detail.p99_ms,
        true,
    ));
    // What a request costs, summed over every node: the target is on the list's.
    let cost = |name: &str, citus: (f64, f64), one: (f64, f64), target: Option<f64>| {
        [
            Figure::measure(
                format!("{name}: CPU per request, every PostgreSQL node, Citus (2 workers)"),
                citus.1,
                "µs",
                true,
            )
            .against(one.1, "one PostgreSQL node, same machine and data", target),
            Figure::measure(
                format!("{name}: CPU per request, posture-api, Citus (2 workers)"),
                citus.0,
                "µs",
                true,
            )
            .against(one.0, "one PostgreSQL node, same machine and data", None),
        ]
    };
    figures.extend(cost(
        "small-customer findings list",
        citus.list_cpu,
        one.list_cpu,
        Some(1.5),
    ));
    figures.extend(cost(
        "finding detail",
        citus.detail_cpu,
        one.detail_cpu,
        None,
    ));
    figures.push(against(
        &format!("a pass of {PASS_FINDINGS} new findings: CPU of every PostgreSQL node"),
        "s",
        citus.pass_database_cpu,
        one.pass_database_cpu,
        true,
    ));
    figures.push(against(
        &format!("a pass of {PASS_FINDINGS} new findings (posture-api ingest, whole)"),
        "s",
        citus.pass_secs,
        one.pass_secs,
        true,
    ));
    figures.push(against(
        &format!(
            "its fan-out to 25 subscriptions ({} deliveries)",
            citus.queued
        ),
        "ms",
        citus.fan_out_ms,
        one.fan_out_ms,
        true,
    ));
    drop(cluster);
    Ok(())
}

/// How the customers and the bytes spread over the nodes.
fn spread(coordinator: &str, figures: &mut Vec<Figure>) -> anyhow::Result<()> {
    let nodes = psql_value(
        coordinator,
        "SELECT string_agg(nodeport::text, ',' ORDER BY nodeport) FROM pg_dist_node \
         WHERE groupid > 0",
    )?;
    for port in nodes.split(',').filter(|p| !p.is_empty()) {
        let customers = psql_value(
            coordinator,
            &format!(
                "SELECT count(*) FROM customers c JOIN pg_dist_shard_placement p \
                   ON p.shardid = get_shard_id_for_distribution_column('findings', c.id) \
                 WHERE p.nodeport = {port}"
            ),
        )?;
        let bytes = psql_value(
            coordinator,
            &format!(
                "SELECT coalesce(sum(shard_size), 0) FROM citus_shards \
                 WHERE nodeport = {port} AND citus_table_type = 'distributed'"
            ),
        )?;
        figures.push(Figure::measure(
            format!("customers on worker :{port}"),
            customers.parse().unwrap_or(f64::NAN),
            "customers",
            false,
        ));
        figures.push(Figure::measure(
            format!("bytes of distributed tables on worker :{port}"),
            bytes.parse::<f64>().unwrap_or(f64::NAN) / (1024.0 * 1024.0),
            "MiB",
            false,
        ));
    }
    Ok(())
}
