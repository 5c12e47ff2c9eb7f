//! Loading the benchmark data through the real operator commands.

use std::{path::Path, process::Command, time::Instant};

use anyhow::Context as _;
use serde_json::Value;

use sha2::{Digest as _, Sha256};

use super::Figure;
use crate::{
    gen_data::{self, GenDataArgs},
    process::{eprintln_status, output, psql_value, run},
};

/// A customer of the loaded data with a key that reads everything.
#[derive(Clone, Debug)]
pub struct Customer {
    pub id: String,
    pub key: String,
    /// SHA-256 of the key, hex (what the key lookup matches).
    pub key_hash: String,
    pub findings: usize,
    pub identities: usize,
}

/// What the load produced.
pub struct Loaded {
    pub largest: Customer,
    pub small: Customer,
}

pub(super) fn api(bin: &Path, url: &str, args: &[&str]) -> anyhow::Result<Value> {
    let text = output(
        Command::new(bin)
            .args(args)
            .arg("--json")
            .env("DATABASE_URL", url)
            .env("POSTURE_LOG", "warn"),
    )?;
    serde_json::from_str(text.trim()).with_context(|| format!("output of {args:?}"))
}

pub fn load(
    bin: &Path,
    url: &str,
    data: &GenDataArgs,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<Loaded> {
    let marker = data.out.join("complete");
    if !marker.exists() {
        eprintln_status(&format!(
            "generating {} findings over {} customers",
            data.findings, data.customers
        ));
        gen_data::run(data)?;
        std::fs::write(&marker, "")?;
    }
    api(bin, url, &["migrate"])?;
    let specs = gen_data::specs(data);
    eprintln_status("ingesting through posture-api ingest");
    let mut customers = Vec::new();
    let mut findings = 0usize;
    let started = Instant::now();
    for (i, spec) in specs.iter().enumerate() {
        let customer = api(bin, url, &["customers", "create", "--name", &spec.name])?;
        let id = customer["id"].as_str().context("customer id")?.to_owned();
        let file = data.out.join(format!("customer-{i:03}.jsonl"));
        let pass = api(
            bin,
            url,
            &["ingest", "--customer", &id, file.to_str().context("path")?],
        )?;
        findings += pass["findings"].as_u64().unwrap_or(0) as usize;
        customers.push((id, spec.findings, spec.identities));
    }
    let seconds = started.elapsed().as_secs_f64();
    eprintln_status(&format!("ingested {findings} findings in {seconds:.1} s"));
    let copy = copy_baseline(url, &data.out)?;
    let rate = findings as f64 / seconds;
    figures.push(
        Figure::measure(
            "ingest: findings (with identities) per second, posture-api ingest",
            rate,
            "rows/s",
            false,
        )
        .against(
            findings as f64 / copy.plain,
            "psql \\copy of the same findings and identities",
            Some(0.5),
        ),
    );
    figures.push(
        Figure::measure(
            "ingest against \\copy into tables that keep posture's foreign keys",
            rate,
            "rows/s",
            false,
        )
        .against(
            findings as f64 / copy.with_foreign_keys,
            "psql \\copy of the same rows, composite foreign keys checked",
            None,
        ),
    );
    // Settle before the read load: statistics current, visibility map set, and the dirty
    // pages of the load written now rather than by a checkpoint in the middle of a run.
    run(Command::new("psql")
        .arg(url)
        .args(["-qc", "VACUUM ANALYZE", "-c", "CHECKPOINT"]))?;

    let customer = |(id, findings, identities): (String, usize, usize)| {
        with_key(bin, url, id, findings, identities)
    };
    Ok(Loaded {
        largest: customer(customers[0].clone())?,
        small: customer(customers[customers.len() / 2].clone())?,
    })
}

/// A loaded customer, with a new key that reads everything.
pub(super) fn with_key(
    bin: &Path,
    url: &str,
    id: String,
    findings: usize,
    identities: usize,
) -> anyhow::Result<Customer> {
    let mut args = vec!["keys", "issue", "--customer", &id, "--name", "bench"];
    for scope in ["read:identities", "read:findings", "read:roles", "read:upr"] {
        args.extend(["--scope", scope]);
    }
    let issued = api(bin, url, &args)?;
    let key = issued["key"].as_str().context("key")?.to_owned();
    let key_hash = Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Customer {
        id,
        key,
        key_hash,
        findings,
        identities,
    })
}

/// The columns `COPY` can write (all but generated ones), comma-separated.
fn copy_columns(url: &str, table: &str) -> anyhow::Result<String> {
    psql_value(
        url,
        &format!(
            "SELECT string_agg(quote_ident(attname), ',' ORDER BY attnum) FROM pg_attribute \
             WHERE attrelid = '{table}'::regclass AND attnum > 0 AND NOT attisdropped \
             AND attgenerated = ''"
        ),
    )
}

/// The tables the `\copy` baselines load, identities first (findings refer to them).
const COPY_TABLES: [&str; 2] = ["identities", "findings"];

/// The `ALTER TABLE` that gives `bench_copy_{table}` the foreign keys of `table`, pointing
/// at the copy of a table that is copied too and at posture's own table otherwise.
fn copy_foreign_keys(url: &str, table: &str) -> anyhow::Result<String> {
    let definitions = psql_value(
        url,
        &format!(
            "SELECT string_agg('ADD ' || pg_get_constraintdef(oid), ', ') FROM pg_constraint \
             WHERE conrelid = '{table}'::regclass AND contype = 'f'"
        ),
    )?;
    let definitions = COPY_TABLES.iter().fold(definitions, |text, copied| {
        text.replace(
            &format!("REFERENCES {copied}("),
            &format!("REFERENCES bench_copy_{copied}("),
        )
    });
    Ok(format!("ALTER TABLE bench_copy_{table} {definitions}"))
}

/// Seconds `psql \copy` takes to load the ingested findings and identities, as CSV.
struct CopyBaseline {
    /// Into empty tables shaped like posture's (`LIKE ... INCLUDING ALL`: the same columns,
    /// indexes and checks), which leaves out foreign keys.
    plain: f64,
    /// The same, with posture's composite foreign keys added (deferrable ones deferred as in
    /// posture), so every row's tenant and identity is checked as ingest checks them.
    with_foreign_keys: f64,
}

fn copy_baseline(url: &str, dir: &Path) -> anyhow::Result<CopyBaseline> {
    let psql = |command: &str| run(Command::new("psql").arg(url).args(["-qc", command]));
    let columns = COPY_TABLES
        .iter()
        .map(|table| copy_columns(url, table))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let foreign_keys = COPY_TABLES
        .iter()
        .map(|table| copy_foreign_keys(url, table))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let file = |table: &str| dir.join(format!("copy-{table}.csv"));
    for (table, columns) in COPY_TABLES.iter().zip(&columns) {
        psql(&format!(
            "\\copy (SELECT {columns} FROM {table}) TO '{}' WITH (FORMAT csv)",
            file(table).display()
        ))?;
    }
    let load = |with_foreign_keys: bool| -> anyhow::Result<f64> {
        // Findings first: they refer to the copy of identities.
        for table in COPY_TABLES.iter().rev() {
            psql(&format!("DROP TABLE IF EXISTS bench_copy_{table}"))?;
        }
        for (table, alter) in COPY_TABLES.iter().zip(&foreign_keys) {
            psql(&format!(
                "CREATE TABLE bench_copy_{table} (LIKE {table} INCLUDING ALL)"
            ))?;
            if with_foreign_keys {
                psql(alter)?;
            }
        }
        psql("CHECKPOINT")?;
        let started = Instant::now();
        for (table, columns) in COPY_TABLES.iter().zip(&columns) {
            psql(&format!(
                "\\copy bench_copy_{table} ({columns}) FROM '{}' WITH (FORMAT csv)",
                file(table).display()
            ))?;
        }
        Ok(started.elapsed().as_secs_f64())
    };
    let baseline = CopyBaseline {
        plain: load(false)?,
        with_foreign_keys: load(true)?,
    };
    for table in COPY_TABLES.iter().rev() {
        psql(&format!("DROP TABLE bench_copy_{table}"))?;
    }
    for table in COPY_TABLES {
        std::fs::remove_file(file(table))?;
    }
    Ok(baseline)
}
