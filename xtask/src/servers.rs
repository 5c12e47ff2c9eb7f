//! The throwaway servers tasks start on loopback: PostgreSQL and Redis, and free ports.

use crate::{files::scratch_dir, process::eprintln_status};

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
