//! SQL load with pgbench: what the database itself can do.
//!
//! The scripts are the statements `posture-api` sends for a request (taken from the server
//! log), run with `-M prepared` and `:variables` so the database plans and executes them as
//! it does for the API's prepared statements.

use std::{process::Command, time::Duration};

use anyhow::Context as _;

use super::{Figure, load::Loaded};
use crate::{files::scratch_dir, process::output};

/// The key lookup of an uncached request (`:h` is the key's SHA-256 as a bytea literal).
pub const KEY_LOOKUP: &str = "SELECT id, customer_id, key_hash, scopes, expires_at FROM api_keys \
    WHERE key_hash = :h AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) LIMIT 1;\n";

/// A page of `severity=critical,high&status=open` at `:o`: the ids in list order, then the
/// rows with their identities.
pub const FINDINGS_PAGE: &str = "SELECT coalesce(array_agg(id), '{}') AS ids FROM (SELECT id FROM findings \
    WHERE customer_id = :c AND severity_rank = ANY('{1,2}') AND status = ANY('{open}') \
    ORDER BY severity_rank, detected_at DESC, id LIMIT 100 OFFSET :o) p \\gset\n\
    SELECT f.id, f.cloud_tenant_id, f.finding_type, f.severity, f.status, f.title, f.description, \
    f.detected_at, f.updated_at, i.id, i.display_name, i.kind, i.cloud_tenant_id FROM findings f \
    LEFT JOIN identities i ON i.customer_id = f.customer_id AND i.id = f.identity_id \
    WHERE f.customer_id = :c AND f.id = ANY(:ids);\n";

/// `meta.total` counted per request.
pub const FINDINGS_COUNT: &str = "SELECT count(*) FROM findings WHERE customer_id = :c \
    AND severity_rank = ANY('{1,2}') AND status = ANY('{open}');\n";

/// `meta.total` as posture reads it: from the totals each pass writes.
pub const FINDINGS_TOTALS: &str = "SELECT sum(total) FROM finding_totals WHERE customer_id = :c \
    AND severity = ANY('{critical,high}') AND status = ANY('{open}');\n";

/// The first page of identities.
pub const IDENTITIES_PAGE: &str = "SELECT id, cloud_tenant_id, kind, display_name, principal_name, \
    first_seen_at, last_seen_at FROM identities WHERE customer_id = :c ORDER BY id LIMIT 100 OFFSET 0;\n";

pub const IDENTITIES_COUNT: &str = "SELECT count(*) FROM identities WHERE customer_id = :c;\n";

/// One finding with its identity (`:f` is its id).
pub const FINDING_DETAIL: &str = "SELECT f.id, f.cloud_tenant_id, f.finding_type, f.severity, \
    f.status, f.title, f.description, f.detected_at, f.updated_at, i.id, i.display_name, i.kind, \
    i.cloud_tenant_id FROM findings f LEFT JOIN identities i ON i.customer_id = f.customer_id \
    AND i.id = f.identity_id WHERE f.customer_id = :c AND f.id = :f;\n";

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
    // Statements still running when pgbench stops finish in the server: let them drain
    // before the next measurement.
    std::thread::sleep(Duration::from_secs(1));
    if text.contains("failed") && !text.contains("number of failed transactions: 0") {
        anyhow::bail!("pgbench {name} had failed transactions:\n{text}");
    }
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
    let vars = [("c", loaded.largest.id.as_str())];
    let count = pgbench(url, "count", FINDINGS_COUNT, &vars, clients, duration)?;
    let totals = pgbench(url, "totals", FINDINGS_TOTALS, &vars, clients, duration)?;
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
