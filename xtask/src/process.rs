//! Processes the tasks run: commands, status lines for the person running the task, and the
//! throwaway PostgreSQL and Redis servers.

use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, bail};

use crate::files::scratch_dir;

/// A line of progress for the person running the task (stderr).
pub fn eprintln_status(message: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "xtask: {message}");
}

/// Runs a command, failing with its command line if it fails.
pub fn run(command: &mut Command) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("running {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed with {status}");
    }
    Ok(())
}

/// Runs a command and returns its stdout.
pub fn output(command: &mut Command) -> anyhow::Result<String> {
    let out = command
        .output()
        .with_context(|| format!("running {command:?}"))?;
    if !out.status.success() {
        bail!(
            "{command:?} failed with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// Whether an executable is on PATH.
pub fn on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// A TCP port free on loopback right now.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A throwaway PostgreSQL in `target/xtask/<name>`, with extra server settings.
pub fn postgres(
    name: &str,
    settings: &str,
) -> anyhow::Result<posture_test_support::servers::PostgresServer> {
    let started = std::time::Instant::now();
    let server =
        posture_test_support::servers::PostgresServer::start(&scratch_dir(name)?, settings)?;
    eprintln_status(&format!(
        "PostgreSQL on 127.0.0.1:{} (started in {:.1} s)",
        server.port(),
        started.elapsed().as_secs_f64()
    ));
    Ok(server)
}

/// A throwaway Redis.
pub fn redis() -> anyhow::Result<posture_test_support::servers::RedisServer> {
    let server = posture_test_support::servers::RedisServer::start()?;
    eprintln_status(&format!("Redis at {}", server.url()));
    Ok(server)
}
