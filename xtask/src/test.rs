//! `cargo xtask test`: every test of the workspace against real PostgreSQL and Redis.
//!
//! Starts a throwaway PostgreSQL cluster and Redis server unless `TEST_DATABASE_URL` /
//! `TEST_REDIS_URL` name servers to use, runs `cargo test --workspace` with those variables
//! set, and stops what it started. Arguments after `--` go to `cargo test`.

use std::process::Command;

use crate::{
    files::project_root,
    process::eprintln_status,
    servers::{postgres, redis},
};

pub fn run(extra: &[String]) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let postgres = match std::env::var("TEST_DATABASE_URL") {
        Ok(_) => None,
        Err(_) => Some(postgres("test-postgres", "")?),
    };
    let redis = match std::env::var("TEST_REDIS_URL") {
        Ok(_) => None,
        Err(_) => Some(redis()?),
    };
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command
        .current_dir(project_root())
        .args(["test", "--workspace"])
        .args(extra);
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
