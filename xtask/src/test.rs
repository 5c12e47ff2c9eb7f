//! `cargo xtask test`: every test of the workspace against real PostgreSQL and Redis.
//!
//! Starts a throwaway PostgreSQL cluster and Redis server unless `TEST_DATABASE_URL` /
//! `TEST_REDIS_URL` name servers to use, runs `cargo test --workspace` with those variables
//! set, and stops what it started. Arguments after `--` go to `cargo test`. Receivers that
//! verify deliveries with the official Standard Webhooks library run the Python of
//! `target/test-venv` (`TEST_PYTHON`), installed here when missing; the PgBouncer tests run
//! `TEST_PGBOUNCER` (1.21 or later, built into `target/pgbouncer` when missing).

use crate::{
    files::project_root,
    process::{eprintln_status, python_venv},
    servers::{citus, postgres, redis},
};

/// What the tests' receivers verify deliveries with, pinned.
const PYTHON_PACKAGES: &[&str] = &["standardwebhooks==1.1.0"];

pub fn run(extra: &[String]) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let venv = project_root().join("target").join("test-venv");
    python_venv(&venv, PYTHON_PACKAGES)?;
    let pgbouncer = match std::env::var_os("TEST_PGBOUNCER") {
        Some(_) => None,
        None => Some(crate::pgbouncer::ensure()?),
    };
    let postgres = match std::env::var("TEST_DATABASE_URL") {
        Ok(_) => None,
        Err(_) => Some(postgres("test-postgres", "")?),
    };
    let redis = match std::env::var("TEST_REDIS_URL") {
        Ok(_) => None,
        Err(_) => Some(redis()?),
    };
    let mut command = crate::process::cargo();
    command
        .current_dir(project_root())
        .args(["test", "--workspace"])
        .args(extra);
    if std::env::var_os("TEST_PYTHON").is_none() {
        command.env("TEST_PYTHON", venv.join("bin").join("python"));
    }
    if let Some(pgbouncer) = &pgbouncer {
        command.env("TEST_PGBOUNCER", pgbouncer);
    }
    if let Some(pg) = &postgres {
        command.env("TEST_DATABASE_URL", &pg.url);
    }
    if let Some(redis) = &redis {
        command.env("TEST_REDIS_URL", redis.url());
    }
    let status = command.status()?;
    drop(redis);
    drop(postgres);
    eprintln_status(&format!(
        "tests finished in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    if !status.success() {
        anyhow::bail!("tests failed");
    }
    Ok(())
}

/// Tests at once on Citus: they wait on three servers more than they use the CPU.
const CITUS_TEST_THREADS: &str = "4";

/// `cargo xtask test --citus`: the integration suites (every crate's `tests/it`) against a
/// coordinator and two workers on loopback (`TEST_CITUS_WORKERS`), with Redis and
/// PgBouncer. Tests about one PostgreSQL node only (a streaming standby, a promotion) say
/// so and pass without running.
pub fn run_citus(extra: &[String]) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let venv = project_root().join("target").join("test-venv");
    python_venv(&venv, PYTHON_PACKAGES)?;
    let pgbouncer = match std::env::var_os("TEST_PGBOUNCER") {
        Some(_) => None,
        None => Some(crate::pgbouncer::ensure()?),
    };
    let cluster = citus("test-citus", 2, "")?;
    let redis = redis()?;
    let mut command = crate::process::cargo();
    // Every crate's `tests/it` (the store's, the API's, the worker's, the delivery's and the
    // limiter's): the workspace as a whole, so nothing is built again for the run.
    command
        .current_dir(project_root())
        .args(["test", "--workspace", "--test", "it"])
        .args(extra);
    if !extra.iter().any(|a| a == "--") {
        command.arg("--");
    }
    command
        .args(["--test-threads", CITUS_TEST_THREADS])
        .env("TEST_DATABASE_URL", &cluster.coordinator.url)
        .env("TEST_CITUS_WORKERS", cluster.workers_variable())
        .env("TEST_REDIS_URL", redis.url());
    if std::env::var_os("TEST_PYTHON").is_none() {
        command.env("TEST_PYTHON", venv.join("bin").join("python"));
    }
    if let Some(pgbouncer) = &pgbouncer {
        command.env("TEST_PGBOUNCER", pgbouncer);
    }
    let status = command.status()?;
    drop(redis);
    drop(cluster);
    eprintln_status(&format!(
        "tests on Citus finished in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    if !status.success() {
        anyhow::bail!("tests on Citus failed");
    }
    Ok(())
}
