//! `cargo xtask fuzz`: schemathesis against a running posture, as an outsider would try it.
//!
//! Starts a throwaway PostgreSQL, migrates, loads two customers of demo data through the real
//! `posture-api ingest`, issues the first a key holding every scope, serves the API on a free
//! port (rate limit raised so the fuzzer is not throttled; webhook targets on private
//! addresses allowed, as in the demo) and runs schemathesis (pinned, installed into
//! `target/fuzz-venv` on first use) on the served contract with every check and the
//! examples, coverage, fuzzing and stateful phases. Fails when schemathesis reports any
//! failure. `docs/security-testing.md` says how to read and reproduce a failure.
//! `xtask/fuzz/posture_hooks.py` drops the refusals of schema-valid cursors that this server
//! did not issue (a rule OpenAPI cannot state); nothing else is filtered.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use clap::Args;

use crate::{
    binaries::{
        Guard, api_json, api_serve, build_binaries, create_customer, every_scope, ingest_demo_data,
        issue_key, rand_bytes, wait_until_listening,
    },
    demo_data::CustomerSpec,
    files::{project_root, scratch_dir},
    process::{eprintln_status, python_venv},
    servers::free_port,
};

/// The schemathesis release the contract is fuzzed with.
pub const SCHEMATHESIS: &str = "schemathesis==4.32.5";

#[derive(Args, Debug)]
pub struct FuzzArgs {
    /// Seed of the run (a fixed one reproduces a run; CI runs a fixed and a random one).
    #[arg(long)]
    seed: Option<u64>,
    /// Examples per operation and phase.
    #[arg(long, default_value_t = 100)]
    examples: u32,
    /// Phases to run.
    #[arg(long, default_value = "examples,coverage,fuzzing,stateful")]
    phases: String,
    /// The Python virtual environment holding schemathesis (created when missing).
    #[arg(long)]
    venv: Option<PathBuf>,
}

/// schemathesis from the virtual environment, installed when missing.
fn schemathesis(venv: &Path) -> anyhow::Result<PathBuf> {
    python_venv(venv, &[SCHEMATHESIS])?;
    Ok(venv.join("bin").join("schemathesis"))
}

/// Two customers with demo data, each with a key holding every scope; returns the keys.
fn customers(bin: &Path, env: &[(&str, &str)]) -> anyhow::Result<Vec<String>> {
    let data = scratch_dir("fuzz-data")?;
    let mut keys = Vec::new();
    for (name, seed) in [("Contoso Group", 1), ("Fabrikam Inc", 2)] {
        let spec = CustomerSpec {
            name: name.into(),
            tenants: 2,
            identities: 300,
            findings: 1000,
            upr_days: 30,
            seed,
        };
        let id = create_customer(bin, env, name)?;
        let file = data.join(format!("{seed}.jsonl"));
        ingest_demo_data(bin, env, &id, &spec, &file)?;
        keys.push(issue_key(bin, env, &id, "fuzz", &every_scope())?);
    }
    Ok(keys)
}

/// `posture-api serve` for the fuzzer: on `bind`, logging to `log`, with a rate limit no
/// run reaches and short waits on the events feed.
fn api_server(bin: &Path, database_url: &str, bind: &str, log: &Path) -> anyhow::Result<Command> {
    let mut serve = api_serve(bin, &[("DATABASE_URL", database_url)], bind, log)?;
    serve
        .env(
            "POSTURE_SECRET_KEY",
            base64::engine::general_purpose::STANDARD.encode(rand_bytes()?),
        )
        .env("POSTURE_WEBHOOK_ALLOW_PRIVATE", "true")
        .env("POSTURE_RATE_LIMIT", "10000000")
        // A waiting request on the events feed answers within 1 s (the fuzzer's requests
        // time out after 10 s, and a wait of 30 s per generated case would take hours).
        .env("POSTURE_EVENT_MAX_WAIT_SECS", "1")
        .env("POSTURE_EVENT_STREAM_SECS", "1")
        .env("POSTURE_LOG", "warn");
    Ok(serve)
}

pub fn run_fuzz(args: &FuzzArgs) -> anyhow::Result<()> {
    let venv = args
        .venv
        .clone()
        .unwrap_or_else(|| project_root().join("target").join("fuzz-venv"));
    let schemathesis = schemathesis(&venv)?;
    let bin = build_binaries()?;
    let postgres = crate::servers::postgres("fuzz-postgres", "")?;
    let env = [("DATABASE_URL", postgres.url.as_str())];
    api_json(&bin, &env, &["migrate"])?;

    let keys = customers(&bin, &env)?;

    let bind = format!("127.0.0.1:{}", free_port()?);
    let log = project_root().join("target").join("fuzz-api.log");
    let mut serve = api_server(&bin, &postgres.url, &bind, &log)?;
    let _server = Guard(vec![serve.spawn().context("starting posture-api serve")?]);
    wait_until_listening(&bind)?;

    let seed = args.seed.unwrap_or_else(|| {
        u64::from_le_bytes(
            rand_bytes().map_or([7; 32], |b| b)[..8]
                .try_into()
                .unwrap_or([7; 8]),
        )
    });
    eprintln_status(&format!(
        "schemathesis, seed {seed} (reproduce: cargo xtask fuzz --seed {seed})"
    ));
    let report = project_root().join("target").join("fuzz-report");
    // Its working directory: schemathesis keeps its cache (`.schemathesis/`) there.
    let workdir = project_root().join("target").join("fuzz");
    std::fs::create_dir_all(&workdir)?;
    let status = Command::new(&schemathesis)
        .arg("run")
        .arg(format!("http://{bind}/api/v1/openapi.json"))
        .args(["--header", &format!("Authorization: Bearer {}", keys[0])])
        .args(["--checks", "all"])
        .args(["--phases", &args.phases])
        .args(["--max-examples", &args.examples.to_string()])
        .args(["--seed", &seed.to_string()])
        // One worker: with two, CPython 3.11's `ast.parse` (which hypothesis calls to describe
        // filters) fails in threads ("AST constructor recursion depth mismatch"), an error
        // inside the tool, not a finding.
        .args(["--workers", "1"])
        .args(["--report", "junit", "--report-dir"])
        .arg(&report)
        .arg("--no-color")
        // The contract's one unstated rule: only this server's own cursors are accepted.
        .env("PYTHONPATH", project_root().join("xtask").join("fuzz"))
        .env("SCHEMATHESIS_HOOKS", "posture_hooks")
        .current_dir(&workdir)
        .status()
        .context("running schemathesis")?;
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let errors: Vec<&str> = logged.lines().filter(|l| l.contains("ERROR")).collect();
    if !errors.is_empty() {
        eprintln_status(&format!(
            "posture-api logged {} ERROR line(s):",
            errors.len()
        ));
        for line in errors.iter().take(20) {
            eprintln_status(line);
        }
    }
    if !status.success() {
        bail!(
            "schemathesis found failures (seed {seed}); see above and {}",
            report.display()
        );
    }
    if !errors.is_empty() {
        bail!("posture-api logged errors while fuzzed: a client's mistake must not be an ERROR");
    }
    eprintln_status(&format!("schemathesis: no failures (seed {seed})"));
    Ok(())
}
