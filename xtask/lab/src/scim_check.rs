//! SCIM conformance from outside (part of `cargo xtask clients`): scim2-tester, through the
//! `scim2` command of the PyPI package `scim2-cli`, runs every check it has against
//! `/scim/v2` of a served posture — discovery, then for users and groups: create, read,
//! list, `attributes`/`excludedAttributes`, `.search`, replace, delete, and PATCH add,
//! remove and replace of every attribute the schemas advertise — and fails on any result
//! but SUCCESS (docs/scim.md).

use std::{path::Path, process::Command};

use anyhow::{Context as _, bail};

use crate::{
    binaries::{Guard, api_serve, create_customer, issue_key, wait_until_listening},
    process::{eprintln_status, python_venv},
    servers::free_port,
};

/// The conformance tool, pinned.
const PACKAGE: &str = "scim2-cli==0.6.0";

/// Serves `bin`'s posture-api on `env`'s database (already migrated) with a customer of its
/// own and a `provision:scim` key, and runs `scim2 test` against it; how many checks passed.
pub fn run(bin: &Path, env: &[(&str, &str)], out: &Path) -> anyhow::Result<usize> {
    let venv = out.join("scim-venv");
    python_venv(&venv, &[PACKAGE])?;
    let customer = create_customer(bin, env, "SCIM conformance")?;
    let key = issue_key(bin, env, &customer, "scim2-tester", &["provision:scim"])?;
    let bind = format!("127.0.0.1:{}", free_port()?);
    let log = out.join("posture-api-scim.log");
    let mut serve = api_serve(bin, env, &bind, &log)?;
    serve
        // The tester makes a few hundred requests in seconds, on one key.
        .env("POSTURE_RATE_LIMIT", "100000")
        .env("POSTURE_LOG", "info");
    let running = Guard(vec![serve.spawn().context("starting posture-api serve")?]);
    wait_until_listening(&bind)?;
    let tested = Command::new(venv.join("bin").join("scim2"))
        .args(["--url", &format!("http://{bind}/scim/v2")])
        // The key in the environment: the command line is visible to the machine's users.
        .env("SCIM_CLI_HEADERS", format!("Authorization: Bearer {key}"))
        .args(["test", "--verbose"])
        .output()
        .context("running scim2 test")?;
    drop(running);
    let report = String::from_utf8_lossy(&tested.stdout);
    std::fs::write(out.join("scim2-test.txt"), report.as_bytes())?;
    let passed = report.lines().filter(|l| l.starts_with("SUCCESS")).count();
    let other: Vec<&str> = report
        .lines()
        .filter(|l| {
            ["ERROR", "CRITICAL", "SKIPPED"]
                .iter()
                .any(|s| l.starts_with(s))
        })
        .collect();
    if !tested.status.success() || !other.is_empty() || passed == 0 {
        bail!(
            "scim2 test: {passed} passed; not passed (the whole report: {}):\n{}\n{}",
            out.join("scim2-test.txt").display(),
            other.join("\n"),
            String::from_utf8_lossy(&tested.stderr)
        );
    }
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let errors: Vec<&str> = logged.lines().filter(|l| l.contains("ERROR")).collect();
    if !errors.is_empty() {
        bail!(
            "posture-api logged ERROR lines under scim2 test:\n{}",
            errors.join("\n")
        );
    }
    eprintln_status(&format!(
        "scim2 test: {passed} checks passed, none failed or skipped"
    ));
    Ok(passed)
}

/// `cargo xtask scim`: the same check alone, on a throwaway PostgreSQL.
pub fn run_alone() -> anyhow::Result<()> {
    use base64::Engine as _;
    let bin = crate::binaries::build_binaries()?;
    let postgres = crate::servers::postgres("scim-postgres", "")?;
    let secret_key =
        base64::engine::general_purpose::STANDARD.encode(crate::binaries::rand_bytes()?);
    let env = [
        ("DATABASE_URL", postgres.url.as_str()),
        ("POSTURE_SECRET_KEY", secret_key.as_str()),
    ];
    crate::binaries::api_json(&bin, &env, &["migrate"])?;
    let out = crate::files::project_root().join("target").join("scim");
    std::fs::create_dir_all(&out)?;
    run(&bin, &env, &out).map(|_| ())
}
