//! The customers' CLI (`posture sync`, docs/cli.md) on the largest customer: a first sync
//! into SQLite (rows per second, every list), and the sync after a pass that changed 1% of
//! the findings against the first.

use std::{path::Path, process::Command};

use anyhow::Context as _;
use serde_json::Value;

use super::{Figure, http::Server, load::Customer, sync::Ingest};
use crate::{
    files::scratch_dir,
    process::{eprintln_status, output},
};

/// One `posture sync --json` run: its report.
fn sync(posture: &Path, base: &str, key: &str, db: &Path) -> anyhow::Result<Value> {
    let text = output(
        Command::new(posture)
            .args(["sync", "--json", "--into"])
            .arg(db)
            .env("POSTURE_URL", base)
            .env("POSTURE_API_KEY", key),
    )?;
    serde_json::from_str(text.trim()).context("the report of posture sync --json")
}

fn total(report: &Value, what: &str) -> u64 {
    report["lists"]
        .as_array()
        .map(|lists| lists.iter().filter_map(|l| l[what].as_u64()).sum())
        .unwrap_or(0)
}

pub fn run(
    server: &Server,
    ingest: &Ingest<'_>,
    largest: &Customer,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    eprintln_status("the customers' CLI: posture sync into SQLite, first and after 1% changed");
    let posture = ingest.bin.with_file_name("posture");
    let dir = scratch_dir("bench-cli")?;
    let db = dir.join("posture.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.join(format!("posture.db{suffix}")));
    }
    let first = sync(&posture, &server.base, &largest.key, &db)?;
    let rows = total(&first, "new");
    let first_seconds = first["seconds"].as_f64().context("seconds")?;
    anyhow::ensure!(
        rows as usize >= largest.findings,
        "the first sync wrote {rows} rows for {} findings",
        largest.findings
    );
    figures.push(Figure::measure(
        format!(
            "posture sync: first sync of the {}k-row customer into SQLite ({rows} rows: \
             findings, identities, role recommendations)",
            (largest.findings + 500) / 1000
        ),
        rows as f64 / first_seconds,
        "rows/s",
        false,
    ));
    let (changed, _) = ingest.changed_pass(largest, "changed for the cli")?;
    let next = sync(&posture, &server.base, &largest.key, &db)?;
    let rewritten = total(&next, "changed") + total(&next, "new");
    anyhow::ensure!(
        rewritten as usize == changed,
        "the incremental sync wrote {rewritten} rows, {changed} changed"
    );
    figures.push(
        Figure::measure(
            format!("posture sync after a pass changing {changed} findings: seconds"),
            next["seconds"].as_f64().context("seconds")?,
            "s",
            true,
        )
        .against(first_seconds, "the first sync", None),
    );
    Ok(())
}
