//! The export, the two kinds of pass and the fan-out at both sizes.

use std::{
    path::Path,
    process::Command,
    sync::{Arc, atomic::AtomicU64},
    time::Instant,
};

use anyhow::Context as _;

use super::{FAN_OUT_FLAT, PASS_FLAT, PASSES, READ_FLAT, Scaled, Setup, mirrored};
use crate::{
    bench::{
        deliveries::{SUBSCRIPTIONS, counting_receiver, fan_out_customer, subscribe},
        export::drain,
        load::api,
        sizes::NEW_FINDINGS,
    },
    demo_data::{CustomerSpec, today, write_customer, write_new_findings_pass},
    files::scratch_dir,
    process::eprintln_status,
};

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
pub(super) fn writes(
    bin: &Path,
    setups: &[Setup; 2],
    scaled: &mut Scaled<'_>,
) -> anyhow::Result<()> {
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
            write_customer(&spec, today(), &mut out)?;
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
        let (id, key) = fan_out_customer(bin, &s.postgres.url)?;
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
