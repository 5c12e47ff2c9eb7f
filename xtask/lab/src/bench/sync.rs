//! Keeping in sync, on the largest customer: a cursor page deep in the list against the first
//! page, and a connector's sync loop after a pass that changed 1% of the findings against a
//! full re-read (rows and requests), with the steady-state pass that changed them.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use serde_json::Value;

use super::{
    Figure,
    http::{Load, Server, wrk},
    load::Customer,
};
use crate::process::{eprintln_status, output};

/// The depth of the measured cursor page: 100,000, or half the largest customer's findings
/// in a smaller run (`--largest`).
fn depth(largest: &Customer) -> usize {
    (largest.findings / 2 / 100 * 100).clamp(100, 100_000)
}
/// Findings changed by the measured pass: one in this many.
const CHANGE_EVERY: usize = 100;
/// Page size of the sync loop and of the full re-read (the largest page).
const SYNC_PAGE: usize = 500;

fn get_json(url: &str, key: &str) -> anyhow::Result<Value> {
    let text = output(Command::new("curl").args([
        "-sf",
        "-H",
        &format!("Authorization: Bearer {key}"),
        url,
    ]))?;
    serde_json::from_str(&text).with_context(|| format!("the answer of {url}"))
}

/// Rows and requests of reading a list to its end by following `meta.nextCursor`, and the
/// seconds it took.
fn read_all(base: &str, query: &str, key: &str) -> anyhow::Result<(usize, usize, f64)> {
    let started = Instant::now();
    let (mut rows, mut requests) = (0, 0);
    let mut url = format!("{base}/api/v1/findings?limit={SYNC_PAGE}{query}");
    loop {
        let page = get_json(&url, key)?;
        requests += 1;
        rows += page["data"].as_array().map_or(0, Vec::len);
        match page["meta"]["nextCursor"].as_str() {
            Some(cursor) => {
                url = format!("{base}/api/v1/findings?limit={SYNC_PAGE}{query}&after={cursor}")
            }
            None => return Ok((rows, requests, started.elapsed().as_secs_f64())),
        }
    }
}

/// The customer's ingest file with the title of one finding in [`CHANGE_EVERY`] changed
/// (marked with `mark`, so that each pass made with another mark changes them again).
pub(super) fn changed_pass(
    data_dir: &Path,
    mark: &str,
) -> anyhow::Result<(std::path::PathBuf, usize)> {
    let source = data_dir.join("customer-000.jsonl");
    let target = data_dir.join(format!("customer-000-{mark}.jsonl"));
    let reader = BufReader::new(std::fs::File::open(&source)?);
    let mut out = std::io::BufWriter::new(std::fs::File::create(&target)?);
    let (mut findings, mut changed) = (0, 0);
    for line in reader.lines() {
        let line = line?;
        let mut record: Value = serde_json::from_str(&line)?;
        if record["type"] == "finding" {
            if findings % CHANGE_EVERY == 0 {
                let title = record["title"].as_str().unwrap_or_default().to_owned();
                record["title"] = Value::from(format!("{title} ({mark})"));
                changed += 1;
            }
            findings += 1;
        }
        serde_json::to_writer(&mut out, &record)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok((target, changed))
}

/// How the bench runs an analyzer pass: the binary, the database, the generated files.
pub struct Ingest<'a> {
    pub bin: &'a Path,
    pub database_url: &'a str,
    pub data_dir: &'a Path,
}

impl Ingest<'_> {
    /// Runs a pass of the largest customer changing 1% of its findings; returns how many it
    /// changed and the seconds it took.
    pub fn changed_pass(&self, largest: &Customer, mark: &str) -> anyhow::Result<(usize, f64)> {
        let (file, changed) = changed_pass(self.data_dir, mark)?;
        let started = Instant::now();
        output(
            Command::new(self.bin)
                .args(["ingest", "--customer", &largest.id])
                .arg(&file)
                .env("DATABASE_URL", self.database_url)
                .env("POSTURE_LOG", "warn"),
        )?;
        let seconds = started.elapsed().as_secs_f64();
        std::fs::remove_file(&file)?;
        Ok((changed, seconds))
    }
}

pub fn run(
    server: &Server,
    ingest: &Ingest<'_>,
    largest: &Customer,
    connections: u32,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    eprintln_status("keeping in sync: a deep cursor page, and a sync loop over 1% changed");
    let base = &server.base;
    let key = &largest.key;
    let depth = depth(largest);
    let first = format!("{base}/api/v1/findings?limit=100");
    let before = get_json(
        &format!("{base}/api/v1/findings?limit=100&offset={}", depth - 100),
        key,
    )?;
    let cursor = before["meta"]["nextCursor"]
        .as_str()
        .context("no cursor at the measured depth")?;
    let deep = format!("{base}/api/v1/findings?limit=100&after={cursor}");
    let offset = format!("{base}/api/v1/findings?limit=100&offset={depth}");
    wrk(&deep, key, connections, Duration::from_secs(2))?;
    // Mirrored order: first, deep cursor, deep offset, deep offset, deep cursor, first.
    let first_a = wrk(&first, key, connections, duration)?;
    let deep_a = wrk(&deep, key, connections, duration)?;
    let offset_a = wrk(&offset, key, connections, duration)?;
    let offset_b = wrk(&offset, key, connections, duration)?;
    let deep_b = wrk(&deep, key, connections, duration)?;
    let first_b = wrk(&first, key, connections, duration)?;
    let first = Load::mean(&first_a, &first_b);
    let name = |what: &str| {
        format!(
            "GET /findings, {}k-row customer, {what} (limit 100), {connections} conn: throughput",
            (largest.findings + 500) / 1000
        )
    };
    figures.push(
        Figure::measure(
            name(&format!("cursor page at depth {depth}")),
            Load::mean(&deep_a, &deep_b).requests_per_second,
            "req/s",
            false,
        )
        .against(first.requests_per_second, "the first page", Some(0.9)),
    );
    figures.push(
        Figure::measure(
            name(&format!("offset {depth}")),
            Load::mean(&offset_a, &offset_b).requests_per_second,
            "req/s",
            false,
        )
        .against(first.requests_per_second, "the first page", None),
    );

    let watermark =
        get_json(&format!("{base}/api/v1/findings?limit=1"), key)?["meta"]["syncedThrough"]
            .as_str()
            .context("no syncedThrough")?
            .to_owned();
    let (changed, pass_seconds) = ingest.changed_pass(largest, "changed")?;
    figures.push(Figure::measure(
        format!(
            "ingest: a steady-state pass of the 200k-row customer ({} findings, {changed} \
             changed)",
            largest.findings
        ),
        largest.findings as f64 / pass_seconds,
        "rows/s",
        false,
    ));
    let (sync_rows, sync_requests, sync_seconds) =
        read_all(base, &format!("&modifiedSince={watermark}"), key)?;
    anyhow::ensure!(
        sync_rows == changed,
        "the sync read {sync_rows} rows, {changed} changed"
    );
    let (full_rows, full_requests, full_seconds) = read_all(base, "", key)?;
    let what = format!("sync loop after a pass changing {changed} of {full_rows} findings");
    figures.push(
        Figure::measure(format!("{what}: rows read"), sync_rows as f64, "rows", true).against(
            full_rows as f64,
            "a full re-read",
            None,
        ),
    );
    figures.push(
        Figure::measure(
            format!("{what}: requests (limit {SYNC_PAGE})"),
            sync_requests as f64,
            "requests",
            true,
        )
        .against(full_requests as f64, "a full re-read", None),
    );
    figures.push(
        Figure::measure(format!("{what}: seconds"), sync_seconds, "s", true).against(
            full_seconds,
            "a full re-read",
            None,
        ),
    );
    Ok(())
}
