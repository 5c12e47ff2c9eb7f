//! The throwaway servers tasks start on loopback: PostgreSQL and Redis, and free ports.

use crate::{
    files::scratch_dir,
    process::{eprintln_status, psql_value},
};

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
) -> anyhow::Result<posture_test_servers::servers::PostgresServer> {
    let started = std::time::Instant::now();
    let server =
        posture_test_servers::servers::PostgresServer::start(&scratch_dir(name)?, settings)?;
    eprintln_status(&format!(
        "PostgreSQL on 127.0.0.1:{} (started in {:.1} s)",
        server.port(),
        started.elapsed().as_secs_f64()
    ));
    Ok(server)
}

/// A throwaway Citus cluster in `target/xtask/<name>`: a coordinator and `workers` worker
/// nodes (installing Citus first when it is missing: `citus.rs`).
pub fn citus(
    name: &str,
    workers: usize,
    settings: &str,
) -> anyhow::Result<posture_test_servers::citus::CitusCluster> {
    crate::citus::ensure()?;
    let started = std::time::Instant::now();
    let cluster =
        posture_test_servers::citus::CitusCluster::start(&scratch_dir(name)?, workers, settings)?;
    eprintln_status(&format!(
        "Citus on 127.0.0.1: coordinator {}, workers {} (started in {:.1} s)",
        cluster.coordinator.port(),
        cluster
            .workers
            .iter()
            .map(|w| w.port().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        started.elapsed().as_secs_f64()
    ));
    Ok(cluster)
}

/// Makes `cluster` one database: the extension on every node, the coordinator and each
/// worker registered with the coordinator.
pub fn citus_join(cluster: &posture_test_servers::citus::CitusCluster) -> anyhow::Result<()> {
    let coordinator = &cluster.coordinator;
    for node in std::iter::once(coordinator).chain(&cluster.workers) {
        psql_value(&node.url, "CREATE EXTENSION IF NOT EXISTS citus")?;
    }
    psql_value(
        &coordinator.url,
        &format!(
            "SELECT citus_set_coordinator_host('127.0.0.1', {})",
            coordinator.port()
        ),
    )?;
    for worker in &cluster.workers {
        citus_add_node(coordinator, worker)?;
    }
    Ok(())
}

/// Registers `worker` with `coordinator`.
pub fn citus_add_node(
    coordinator: &posture_test_servers::servers::PostgresServer,
    worker: &posture_test_servers::servers::PostgresServer,
) -> anyhow::Result<()> {
    psql_value(
        &coordinator.url,
        &format!("SELECT citus_add_node('127.0.0.1', {})", worker.port()),
    )?;
    Ok(())
}

/// A throwaway Redis.
pub fn redis() -> anyhow::Result<posture_test_servers::servers::RedisServer> {
    let server = posture_test_servers::servers::RedisServer::start()?;
    eprintln_status(&format!("Redis at {}", server.url()));
    Ok(server)
}
