//! `cargo xtask bench --scale`: whether a request, an export and a pass cost the same when
//! the database holds ten times the data.
//!
//! Two data sets of one shape (5,000 findings per customer on average, the largest customer
//! a tenth of the rows, 500 identities per customer and 2,500 for the largest), by default
//! 1,000,000 and 10,000,000 findings, each loaded through `posture-api ingest` into a
//! PostgreSQL cluster of its own. Both clusters then run at once, each with its
//! `posture-api`, and every figure is measured on both in mirrored order (smaller, larger,
//! larger, smaller; means of two), so that a drift of the machine favours neither size. The
//! report gives each figure at both sizes and its ratio larger / smaller against the goal
//! of docs/performance.md: reads within 15 % (≥ 0.85), a pass within 25 %.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use posture_test_support::servers::PostgresServer;

use super::{
    Figure, PG_SETTINGS,
    cpu::{CpuSample, postmaster_pid},
    deliveries::{NEW_FINDINGS, SUBSCRIPTIONS, counting_receiver, subscribe},
    export::drain,
    http::{Load, Server, wrk},
    load::{Customer, api, with_key},
};
use crate::{
    demo_data::{CustomerSpec, chrono_lite::Day, write_customer, write_new_findings_pass},
    files::scratch_dir,
    gen_data::{self, GenDataArgs},
    process::{self, eprintln_status, output, psql_value},
};

/// Findings per customer on average.
const FINDINGS_PER_CUSTOMER: usize = 5_000;
/// Goal of a read figure: within 15 % of its value at the smaller size.
const READ_FLAT: f64 = 0.85;
/// Goal of a pass: within 25 %.
const PASS_FLAT: f64 = 0.75;
/// Goal of the fan-out's time (lower is better): within 25 %.
const FAN_OUT_FLAT: f64 = 1.25;
/// Runs of each pass figure (the median is taken): a pass of a typical customer is short.
const PASSES: usize = 5;
/// Connections of the read load.
const CONNECTIONS: u32 = 16;

/// One data set, loaded and served.
struct Setup {
    findings: usize,
    postgres: PostgresServer,
    postmaster: u32,
    server: Server,
    small: Customer,
    largest: Customer,
    /// A customer of typical size to re-report (the steady-state pass), and its file.
    steady: (String, PathBuf, usize),
    /// Findings of a typical customer.
    typical: usize,
    load_seconds: f64,
    /// `pg_database_size` once loaded and vacuumed, in MiB.
    loaded_mib: f64,
}

/// `1000000` → `1M`.
fn short(findings: usize) -> String {
    if findings.is_multiple_of(1_000_000) {
        format!("{}M", findings / 1_000_000)
    } else {
        format!("{}k", findings / 1_000)
    }
}

/// Creates and ingests every customer of `data`, two passes at a time (passes of different
/// customers run side by side, as an operator's would); returns (id, findings) in order.
fn ingest_all(
    bin: &Path,
    url: &str,
    data: &GenDataArgs,
) -> anyhow::Result<Vec<(String, usize, usize)>> {
    let specs = gen_data::specs(data);
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let ids: Vec<std::sync::Mutex<Option<String>>> =
        specs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<()> {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(spec) = specs.get(i) else {
                            return Ok(());
                        };
                        let customer =
                            api(bin, url, &["customers", "create", "--name", &spec.name])?;
                        let id = customer["id"].as_str().context("customer id")?.to_owned();
                        let file = data.out.join(format!("customer-{i:03}.jsonl"));
                        api(
                            bin,
                            url,
                            &["ingest", "--customer", &id, file.to_str().context("path")?],
                        )?;
                        *ids[i].lock().map_err(|_| anyhow::anyhow!("poisoned"))? = Some(id);
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if n.is_multiple_of(200) {
                            eprintln_status(&format!("ingested {n} of {} customers", specs.len()));
                        }
                    }
                })
            })
            .collect();
        for worker in workers {
            worker
                .join()
                .map_err(|_| anyhow::anyhow!("an ingest thread panicked"))??;
        }
        Ok(())
    })?;
    specs
        .iter()
        .zip(ids)
        .map(|(spec, id)| {
            let id = id
                .into_inner()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .context("a customer was not ingested")?;
            Ok((id, spec.findings, spec.identities))
        })
        .collect()
}

fn set_up(bin: &Path, findings: usize, pool_size: Option<u32>) -> anyhow::Result<Setup> {
    let customers = (findings / FINDINGS_PER_CUSTOMER).max(2);
    let data = GenDataArgs {
        out: scratch_dir(&format!(
            "bench-data-{customers}-{findings}-{}",
            findings / 10
        ))?,
        customers,
        findings,
        largest: findings / 10,
        identities: 500,
        upr_days: 0,
    };
    let marker = data.out.join("complete");
    if !marker.exists() {
        eprintln_status(&format!(
            "generating {findings} findings over {customers} customers"
        ));
        gen_data::run(&data)?;
        std::fs::write(&marker, "")?;
    }
    let postgres =
        crate::servers::postgres(&format!("bench-scale-{}", short(findings)), PG_SETTINGS)?;
    let url = postgres.url.clone();
    api(bin, &url, &["migrate"])?;
    eprintln_status(&format!(
        "{}: ingesting {customers} customers through posture-api ingest",
        short(findings)
    ));
    let started = Instant::now();
    let loaded = ingest_all(bin, &url, &data)?;
    let load_seconds = started.elapsed().as_secs_f64();
    eprintln_status(&format!(
        "{}: loaded in {load_seconds:.0} s; VACUUM ANALYZE",
        short(findings)
    ));
    process::run(Command::new("psql").arg(&url).args([
        "-qc",
        "VACUUM ANALYZE",
        "-c",
        "CHECKPOINT",
    ]))?;
    let bytes: f64 = psql_value(&url, "SELECT pg_database_size(current_database())")?.parse()?;
    let customer = |i: usize| {
        let (id, findings, identities) = loaded[i].clone();
        with_key(bin, &url, id, findings, identities)
    };
    let middle = loaded.len() / 2;
    let (steady_id, steady_findings, _) = loaded[middle + 1].clone();
    let steady_file = data.out.join(format!("customer-{:03}.jsonl", middle + 1));
    let server = Server::start(bin, &url, None, pool_size)?;
    let postmaster = postmaster_pid(&postgres.data_dir())?;
    Ok(Setup {
        findings,
        postmaster,
        small: customer(middle)?,
        largest: customer(0)?,
        steady: (steady_id, steady_file, steady_findings),
        typical: loaded[middle].1,
        load_seconds,
        loaded_mib: bytes / (1024.0 * 1024.0),
        server,
        postgres,
    })
}

/// A measure taken on both sizes in mirrored order, and the mean of each size's two.
fn mirrored(
    setups: &[Setup; 2],
    mut measure: impl FnMut(usize, &Setup) -> anyhow::Result<f64>,
) -> anyhow::Result<[f64; 2]> {
    let a1 = measure(0, &setups[0])?;
    let b1 = measure(1, &setups[1])?;
    let b2 = measure(1, &setups[1])?;
    let a2 = measure(0, &setups[0])?;
    Ok([(a1 + a2) / 2.0, (b1 + b2) / 2.0])
}

/// Each size's value of one figure, and the ratio larger / smaller against its goal.
struct Scaled<'a> {
    setups: &'a [Setup; 2],
    figures: &'a mut Vec<Figure>,
}

impl Scaled<'_> {
    fn push(
        &mut self,
        what: &str,
        values: [f64; 2],
        unit: &str,
        lower_is_better: bool,
        goal: Option<f64>,
    ) {
        let [small, large] = [&self.setups[0], &self.setups[1]].map(|s| short(s.findings));
        for (setup, value) in self.setups.iter().zip(values) {
            self.figures.push(Figure::measure(
                format!("scale {}: {what}", short(setup.findings)),
                value,
                unit,
                lower_is_better,
            ));
        }
        self.figures.push(
            Figure::measure(
                format!("scale {large} / {small}: {what}"),
                values[1],
                unit,
                lower_is_better,
            )
            .against(values[0], format!("the same at {small}"), goal),
        );
    }
}

/// The cursor of the largest customer's last page (from the page before it).
fn last_page(s: &Setup) -> anyhow::Result<String> {
    let depth = s.largest.findings.saturating_sub(200);
    let text = output(Command::new("curl").args([
        "-sf",
        "-H",
        &format!("Authorization: Bearer {}", s.largest.key),
        &format!("{}/api/v1/findings?limit=100&offset={depth}", s.server.base),
    ]))?;
    let page: serde_json::Value = serde_json::from_str(&text)?;
    let cursor = page["meta"]["nextCursor"]
        .as_str()
        .context("no cursor before the last page")?;
    Ok(format!(
        "{}/api/v1/findings?limit=100&after={cursor}",
        s.server.base
    ))
}

/// A measured route: what it is, and its URL and key at each size.
type Route = (&'static str, [(String, String); 2]);

/// The routes measured.
fn routes(setups: &[Setup; 2]) -> anyhow::Result<Vec<Route>> {
    let list = "/api/v1/findings?severity=critical,high&status=open&limit=100";
    let mut routes: Vec<Route> = Vec::new();
    let each = |f: &dyn Fn(&Setup) -> anyhow::Result<(String, String)>| {
        Ok::<_, anyhow::Error>([f(&setups[0])?, f(&setups[1])?])
    };
    routes.push((
        "GET /findings crit+high open, small customer, first page",
        each(&|s| Ok((format!("{}{list}", s.server.base), s.small.key.clone())))?,
    ));
    routes.push((
        "GET /findings crit+high open, largest customer (10% of the rows), first page",
        each(&|s| Ok((format!("{}{list}", s.server.base), s.largest.key.clone())))?,
    ));
    routes.push((
        "GET /findings, largest customer, its last page by cursor",
        each(&|s| Ok((last_page(s)?, s.largest.key.clone())))?,
    ));
    routes.push((
        "GET /findings/{id}, largest customer",
        each(&|s| {
            let id = psql_value(
                &s.postgres.url,
                &format!(
                    "SELECT id FROM findings WHERE customer_id = '{}' ORDER BY id \
                     OFFSET 1000 LIMIT 1",
                    s.largest.id
                ),
            )?;
            Ok((
                format!("{}/api/v1/findings/{id}", s.server.base),
                s.largest.key.clone(),
            ))
        })?,
    ));
    routes.push((
        "GET /identities, largest customer (2,500 identities)",
        each(&|s| {
            Ok((
                format!("{}/api/v1/identities?limit=100", s.server.base),
                s.largest.key.clone(),
            ))
        })?,
    ));
    Ok(routes)
}

/// The read routes: throughput, p99 and CPU per request of posture-api and PostgreSQL.
fn reads(setups: &[Setup; 2], duration: Duration, scaled: &mut Scaled<'_>) -> anyhow::Result<()> {
    for (what, targets) in routes(setups)? {
        eprintln_status(&format!("scale: {what}"));
        for (url, key) in &targets {
            wrk(url, key, CONNECTIONS, Duration::from_secs(2))?;
        }
        let mut loads: [Vec<Load>; 2] = [Vec::new(), Vec::new()];
        let mut cpu: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
        mirrored(setups, |i, s| {
            let (url, key) = &targets[i];
            let before = CpuSample::take(s.server.pid(), s.postmaster)?;
            let load = wrk(url, key, CONNECTIONS, duration)?;
            let requests = load.requests_per_second * duration.as_secs_f64();
            cpu[i].push(
                CpuSample::take(s.server.pid(), s.postmaster)?.per_request_since(&before, requests),
            );
            let rate = load.requests_per_second;
            loads[i].push(load);
            Ok(rate)
        })?;
        let mean = |i: usize| Load::mean(&loads[i][0], &loads[i][1]);
        let (small, large) = (mean(0), mean(1));
        let what = format!("{what}, {CONNECTIONS} conn");
        scaled.push(
            &format!("{what}: throughput"),
            [small.requests_per_second, large.requests_per_second],
            "req/s",
            false,
            Some(READ_FLAT),
        );
        scaled.push(
            &format!("{what}: p99"),
            [small.p99_ms, large.p99_ms],
            "ms",
            true,
            None,
        );
        let per = |i: usize, side: usize| {
            let pick = |c: &(f64, f64)| if side == 0 { c.0 } else { c.1 };
            (pick(&cpu[i][0]) + pick(&cpu[i][1])) / 2.0
        };
        for (side, name) in [(0, "posture-api"), (1, "PostgreSQL")] {
            scaled.push(
                &format!("{what}: {name} CPU per request"),
                [per(0, side), per(1, side)],
                "µs",
                true,
                None,
            );
        }
    }
    Ok(())
}

/// Seconds of one `posture-api ingest` of `file` for `customer`.
fn pass_seconds(bin: &Path, url: &str, customer: &str, file: &Path) -> anyhow::Result<f64> {
    let started = Instant::now();
    api(
        bin,
        url,
        &[
            "ingest",
            "--customer",
            customer,
            file.to_str().context("path")?,
        ],
    )?;
    Ok(started.elapsed().as_secs_f64())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The export, the two kinds of pass and the fan-out.
fn writes(bin: &Path, setups: &[Setup; 2], scaled: &mut Scaled<'_>) -> anyhow::Result<()> {
    eprintln_status("scale: export of the largest customer");
    let export = |s: &Setup| {
        let mut command = Command::new("curl");
        command
            .args(["-sS", "--fail", "-H"])
            .arg(format!("Authorization: Bearer {}", s.largest.key))
            .arg(format!("{}/api/v1/findings/export", s.server.base));
        command
    };
    for s in setups {
        drain(export(s))?;
    }
    let rows = mirrored(setups, |_, s| {
        let (_, seconds) = drain(export(s))?;
        Ok(s.largest.findings as f64 / seconds)
    })?;
    scaled.push(
        "export NDJSON of the largest customer (10% of the rows)",
        rows,
        "rows/s",
        false,
        Some(READ_FLAT),
    );

    eprintln_status("scale: passes (steady state, a new customer's first)");
    let mut steady = [Vec::new(), Vec::new()];
    let mut first = [Vec::new(), Vec::new()];
    let scratch = scratch_dir("bench-scale-passes")?;
    let mut seed = 900_000u64;
    for round in 0..PASSES {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let s = &setups[i];
            let (id, file, findings) = &s.steady;
            steady[i].push(*findings as f64 / pass_seconds(bin, &s.postgres.url, id, file)?);
            seed += 1;
            let spec = CustomerSpec {
                name: format!("Scale new {seed}"),
                tenants: 2,
                identities: 500,
                findings: s.typical,
                upr_days: 0,
                seed,
            };
            let path = scratch.join(format!("new-{seed}.jsonl"));
            let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
            write_customer(&spec, Day::today(), &mut out)?;
            std::io::Write::flush(&mut out)?;
            drop(out);
            let customer = api(
                bin,
                &s.postgres.url,
                &["customers", "create", "--name", &spec.name],
            )?;
            let id = customer["id"].as_str().context("customer id")?;
            first[i].push(s.typical as f64 / pass_seconds(bin, &s.postgres.url, id, &path)?);
            std::fs::remove_file(&path)?;
        }
    }
    let typical = setups[0].steady.2;
    scaled.push(
        &format!("ingest: steady-state pass re-reporting a customer ({typical} findings), median of {PASSES}"),
        [median(steady[0].clone()), median(steady[1].clone())],
        "findings/s",
        false,
        Some(PASS_FLAT),
    );
    scaled.push(
        &format!(
            "ingest: a new customer's first pass ({} findings, 500 identities), median of {PASSES}",
            setups[0].typical
        ),
        [median(first[0].clone()), median(first[1].clone())],
        "findings/s",
        false,
        Some(PASS_FLAT),
    );

    eprintln_status("scale: fan-out");
    let mut fan_out = [0.0; 2];
    for (i, s) in setups.iter().enumerate() {
        let customer = api(
            bin,
            &s.postgres.url,
            &["customers", "create", "--name", "Fan-out"],
        )?;
        let id = customer["id"].as_str().context("customer id")?.to_owned();
        let key = api(
            bin,
            &s.postgres.url,
            &[
                "keys",
                "issue",
                "--customer",
                &id,
                "--scope",
                "manage:webhooks",
            ],
        )?["key"]
            .as_str()
            .context("key")?
            .to_owned();
        let hook = counting_receiver(Arc::new(AtomicU64::new(0)))?;
        subscribe(&s.server.base, &key, &hook)?;
        let file = scratch.join("fan-out.jsonl");
        write_new_findings_pass(&file, &uuid_for(i), "n", NEW_FINDINGS)?;
        let pass = api(
            bin,
            &s.postgres.url,
            &["ingest", "--customer", &id, file.to_str().context("path")?],
        )?;
        fan_out[i] = pass["fanOutMs"].as_f64().context("fanOutMs")?;
        std::fs::remove_file(&file)?;
    }
    scaled.push(
        &format!(
            "fan-out of a pass with {NEW_FINDINGS} new findings to {SUBSCRIPTIONS} subscriptions"
        ),
        fan_out,
        "ms",
        true,
        Some(FAN_OUT_FLAT),
    );
    Ok(())
}

/// A tenant id of its own for each size's fan-out customer.
fn uuid_for(i: usize) -> String {
    format!("5ca1e000-0000-4000-8000-{i:012}")
}

pub fn run(
    bin: &Path,
    sizes: &[usize],
    duration: Duration,
    pool_size: Option<u32>,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let [small, large] = <[usize; 2]>::try_from(sizes)
        .map_err(|_| anyhow::anyhow!("--scale-sizes takes two sizes, smaller first"))?;
    anyhow::ensure!(small < large, "--scale-sizes: the smaller size first");
    let setups = [
        set_up(bin, small, pool_size)?,
        set_up(bin, large, pool_size)?,
    ];
    let mut scaled = Scaled {
        setups: &setups,
        figures,
    };
    for s in &setups {
        scaled.figures.push(Figure::measure(
            format!(
                "scale {}: loading through posture-api ingest, two passes at a time",
                short(s.findings)
            ),
            s.load_seconds,
            "s",
            true,
        ));
    }
    reads(&setups, duration, &mut scaled)?;
    let rss = setups
        .iter()
        .map(|s| s.server.peak_rss_mib())
        .collect::<anyhow::Result<Vec<_>>>()?;
    scaled.push(
        "posture-api peak RSS after the read load",
        [rss[0], rss[1]],
        "MiB",
        true,
        None,
    );
    writes(bin, &setups, &mut scaled)?;
    let per_million = [&setups[0], &setups[1]].map(|s| s.loaded_mib / (s.findings as f64 / 1e6));
    scaled.push(
        "database size on disk per million findings, as loaded (identities, indexes, totals)",
        per_million,
        "MiB",
        true,
        None,
    );
    Ok(())
}
