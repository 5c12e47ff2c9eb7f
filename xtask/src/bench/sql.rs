//! SQL load with pgbench: what the database itself can do.

use std::{process::Command, time::Duration};

use anyhow::Context as _;

use super::{Figure, load::Loaded};
use crate::util::{output, scratch_dir};

/// Runs one pgbench script at `clients`, prepared statements; returns transactions/s.
pub fn pgbench(
    url: &str,
    name: &str,
    script: &str,
    vars: &[(&str, &str)],
    clients: u32,
    duration: Duration,
) -> anyhow::Result<f64> {
    let path = scratch_dir("bench-sql")?.join(format!("{name}.sql"));
    std::fs::write(&path, script)?;
    let mut command = Command::new("pgbench");
    command
        .args(["-n", "-M", "prepared", "-j", "2"])
        .arg(format!("-c{clients}"))
        .arg(format!("-T{}", duration.as_secs()));
    for (k, v) in vars {
        command.arg("-D").arg(format!("{k}={v}"));
    }
    command.arg("-f").arg(&path).arg(url);
    let text = output(&mut command)?;
    text.lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("pgbench tps in:\n{text}"))
}

/// `meta.total` as a per-request COUNT(*) versus the per-pass totals posture reads.
pub fn totals(
    url: &str,
    loaded: &Loaded,
    clients: u32,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let customer = &loaded.largest.id;
    let vars = [("c", customer.as_str())];
    let count = pgbench(
        url,
        "count",
        "SELECT count(*) FROM findings WHERE customer_id = :c AND severity_rank = ANY('{1,2}') AND status = ANY('{open}');\n",
        &vars,
        clients,
        duration,
    )?;
    let totals = pgbench(
        url,
        "totals",
        "SELECT sum(total) FROM finding_totals WHERE customer_id = :c AND severity = ANY('{critical,high}') AND status = ANY('{open}');\n",
        &vars,
        clients,
        duration,
    )?;
    figures.push(Figure::measure(
        format!("SQL: COUNT(*) of crit+high open, 200k-row customer, {clients} clients"),
        count,
        "tps",
        false,
    ));
    figures.push(
        Figure::measure(
            format!("SQL: meta.total from per-pass totals, 200k-row customer, {clients} clients"),
            totals,
            "tps",
            false,
        )
        .against(count, "COUNT(*) per request", None),
    );
    Ok(())
}
