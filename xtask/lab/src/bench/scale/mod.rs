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

mod reads;
mod writes;

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use posture_test_support::servers::PostgresServer;

use super::{
    Figure, PG_SETTINGS,
    cpu::postmaster_pid,
    http::Server,
    load::{Customer, api, with_key},
};
use crate::{
    files::scratch_dir,
    gen_data::{self, GenDataArgs},
    process::{self, eprintln_status, psql_value},
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
    reads::reads(&setups, duration, &mut scaled)?;
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
    writes::writes(bin, &setups, &mut scaled)?;
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
