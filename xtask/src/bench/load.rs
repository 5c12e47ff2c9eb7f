//! Loading the benchmark data through the real operator commands.

use std::{path::Path, process::Command, time::Instant};

use anyhow::Context as _;
use serde_json::Value;

use super::Figure;
use crate::{
    gen_data::{self, GenDataArgs},
    util::{eprintln_status, output, run},
};

/// A customer of the loaded data with a key that reads everything.
#[derive(Clone, Debug)]
pub struct Customer {
    pub id: String,
    pub key: String,
    pub findings: usize,
}

/// What the load produced.
pub struct Loaded {
    pub largest: Customer,
    pub small: Customer,
}

fn api(bin: &Path, url: &str, args: &[&str]) -> anyhow::Result<Value> {
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
        customers.push((id, spec.findings));
    }
    let seconds = started.elapsed().as_secs_f64();
    figures.push(Figure::measure(
        "ingest: findings (with identities) per second, posture-api ingest",
        findings as f64 / seconds,
        "rows/s",
        false,
    ));
    eprintln_status(&format!("ingested {findings} findings in {seconds:.1} s"));
    run(Command::new("psql")
        .arg(url)
        .args(["-qc", "VACUUM ANALYZE"]))?;

    let key = |id: &str| -> anyhow::Result<String> {
        let mut args = vec!["keys", "issue", "--customer", id, "--name", "bench"];
        for scope in ["read:identities", "read:findings", "read:roles", "read:upr"] {
            args.extend(["--scope", scope]);
        }
        Ok(api(bin, url, &args)?["key"]
            .as_str()
            .context("key")?
            .to_owned())
    };
    let (largest_id, largest_findings) = customers[0].clone();
    let (small_id, small_findings) = customers[customers.len() / 2].clone();
    Ok(Loaded {
        largest: Customer {
            key: key(&largest_id)?,
            id: largest_id,
            findings: largest_findings,
        },
        small: Customer {
            key: key(&small_id)?,
            id: small_id,
            findings: small_findings,
        },
    })
}
