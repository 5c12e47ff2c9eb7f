//! A Citus cluster on loopback, for the tests and the lab: a coordinator and its worker
//! nodes, each a throwaway PostgreSQL with `shared_preload_libraries = citus`, and databases
//! made on every node (a Citus database exists on each node under the same name, with the
//! extension in each, and the coordinator's copy lists the workers).
//!
//! The integration suites run on such a cluster when `TEST_CITUS_WORKERS` names the
//! workers' `postgres` databases (`cargo xtask test --citus`); `TEST_DATABASE_URL` is then
//! the coordinator's. Citus is a separate server program (AGPL-3.0): posture only talks to
//! it over PostgreSQL's protocol.

use std::path::Path;

use crate::servers::{PostgresServer, ServerError, postgres_bin};

/// The settings every node of a test cluster starts with. Four shards per table (the
/// default is 32), two on each of two workers, keep each test's database small to clone;
/// the rules are the same. Each
/// database with the extension has a maintenance daemon of its own (a background worker),
/// and tests run many databases at once.
pub const NODE_SETTINGS: &str = "-c shared_preload_libraries=citus \
                                 -c max_prepared_transactions=200 -c citus.shard_count=4 \
                                 -c max_worker_processes=100";

/// Whether the Citus extension is installed for the PostgreSQL whose binaries tests use.
pub fn installed() -> bool {
    let Some(bin) = postgres_bin() else {
        return false;
    };
    let Some(root) = bin.parent() else {
        return false;
    };
    // Debian: /usr/lib/postgresql/15/{bin,lib}, and the control file under /usr/share.
    let library = root.join("lib").join("citus.so");
    let version = root.file_name().and_then(|v| v.to_str()).unwrap_or("");
    let control = Path::new("/usr/share/postgresql")
        .join(version)
        .join("extension")
        .join("citus.control");
    library.is_file() && (control.is_file() || root.join("share/extension/citus.control").is_file())
}

/// A coordinator and its workers.
pub struct CitusCluster {
    pub coordinator: PostgresServer,
    pub workers: Vec<PostgresServer>,
}

impl CitusCluster {
    /// Starts a coordinator and `workers` worker nodes in `dir` (emptied first), each with
    /// [`NODE_SETTINGS`] and `settings`.
    pub fn start(dir: &Path, workers: usize, settings: &str) -> Result<Self, ServerError> {
        if !installed() {
            return Err(ServerError(
                "the Citus extension is not installed for this PostgreSQL: run `cargo xtask \
                 setup citus` (it builds Citus from the tarball CITUS_SOURCE names, or prints \
                 how to install Citus's packages)"
                    .to_owned(),
            ));
        }
        let settings = format!("{NODE_SETTINGS} {settings}");
        let coordinator = PostgresServer::start(&dir.join("coordinator"), &settings)?;
        let workers = (0..workers)
            .map(|i| PostgresServer::start(&dir.join(format!("worker{i}")), &settings))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            coordinator,
            workers,
        })
    }

    /// The URLs of the workers' `postgres` databases (what `TEST_CITUS_WORKERS` lists).
    pub fn worker_urls(&self) -> Vec<String> {
        self.workers.iter().map(|w| w.url.clone()).collect()
    }

    /// `TEST_CITUS_WORKERS`'s value for this cluster.
    pub fn workers_variable(&self) -> String {
        self.worker_urls().join(",")
    }
}

/// The worker nodes' `postgres` databases when the tests run on Citus
/// (`TEST_CITUS_WORKERS`, comma-separated URLs); `None` on one PostgreSQL node.
pub fn test_workers() -> Option<Vec<String>> {
    let value = std::env::var("TEST_CITUS_WORKERS").ok()?;
    let urls: Vec<String> = value
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .collect();
    (!urls.is_empty()).then_some(urls)
}

/// Whether this test run is on Citus.
pub fn on_citus() -> bool {
    test_workers().is_some()
}

/// For a test about one PostgreSQL node only (a streaming standby, a promotion): `true`,
/// with a line saying why it does not run, when the tests run on Citus.
pub fn single_node_only(why: &str) -> bool {
    if on_citus() {
        eprintln!("not on Citus: {why}");
        return true;
    }
    false
}
