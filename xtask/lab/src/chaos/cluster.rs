//! The deployment the faults are injected into: one PostgreSQL, one Redis, two
//! `posture-api` instances (the second reaches PostgreSQL through a [`FreezingProxy`]) and
//! two `posture-worker`s, as separate processes started from the debug binaries.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use anyhow::Context as _;
use base64::Engine as _;
use posture_test_support::{
    proxy::FreezingProxy,
    servers::{PostgresServer, RedisServer},
};
use serde_json::Value;

use crate::{
    binaries::{api_json, rand_bytes, wait_until_listening},
    demo_data::write_new_findings_pass,
    files::scratch_dir,
    process::psql_value,
    servers::free_port,
};

/// Every Citus node's settings in these scenarios: logical decoding, which the rebalancer's
/// shard moves use.
pub const CITUS_SETTINGS: &str = "-c max_connections=100 -c wal_level=logical";
/// Every scope: the chaos customers' keys read everything and manage webhooks.
const SCOPES: &[&str] = &[
    "read:identities",
    "read:findings",
    "read:roles",
    "read:upr",
    "manage:webhooks",
    "write:findings",
];

pub struct Cluster {
    pub bin: PathBuf,
    /// PostgreSQL; on Citus the coordinator.
    pub postgres: PostgresServer,
    /// On Citus, the worker nodes (empty on one node).
    pub citus_workers: Vec<PostgresServer>,
    pub redis: RedisServer,
    /// Between the second API instance and PostgreSQL.
    pub proxy: FreezingProxy,
    secret_key: String,
    logs: PathBuf,
    binds: Vec<String>,
    apis: Vec<Option<Child>>,
    workers: Vec<Option<Child>>,
    /// Where each worker serves `/metrics`.
    worker_metrics: Vec<String>,
    /// Customers created so far (each gets a tenant id of its own).
    customers: std::sync::atomic::AtomicU64,
    /// `POSTURE_RATE_LIMIT`, `POSTURE_RATE_WINDOW_SECS`.
    rate_limit: (String, String),
    /// The members of a replicated cluster (`127.0.0.1:p1,127.0.0.1:p2,...`) every process
    /// connects to instead of `postgres` (the failover scenarios).
    hosts: Option<String>,
    /// Whether the API instances read from every member too (one PostgreSQL's standbys; not
    /// a Citus coordinator's, whose reads go through its primary).
    replicas: bool,
}

/// The PostgreSQL posture runs on.
enum Database {
    /// One server of its own.
    Single,
    /// A Citus coordinator and this many workers of its own.
    Citus(usize),
    /// The members of a replicated cluster, each a read replica too.
    Members(String),
    /// The members of a Citus coordinator group somebody else runs (Patroni).
    Coordinators(String),
}

/// A customer with one tenant and a key holding every scope.
pub struct Customer {
    pub id: String,
    /// Its tenant's id.
    pub tenant: String,
    pub key: String,
}

impl Cluster {
    /// Rate limits high enough never to refuse the scenarios' traffic.
    pub fn start(bin: PathBuf) -> anyhow::Result<Self> {
        Self::with_rate_limit(bin, 10_000_000, 900)
    }

    /// With `limit` requests per key (or client address) per `window_secs`.
    pub fn with_rate_limit(bin: PathBuf, limit: u32, window_secs: u32) -> anyhow::Result<Self> {
        Self::build(bin, limit, window_secs, Database::Single)
    }

    /// On a Citus coordinator and `workers` worker nodes (the Citus scenarios).
    pub fn on_citus(bin: PathBuf, workers: usize) -> anyhow::Result<Self> {
        Self::build(bin, 10_000_000, 900, Database::Citus(workers))
    }

    /// On the members of a replicated cluster (`127.0.0.1:p1,...`): every process names them
    /// all in its `DATABASE_URL` with `target_session_attrs=read-write`, and so follows the
    /// primary (the failover scenarios).
    pub fn on_hosts(bin: PathBuf, hosts: &str) -> anyhow::Result<Self> {
        Self::build(bin, 10_000_000, 900, Database::Members(hosts.to_owned()))
    }

    /// On a Citus cluster whose coordinator group's members are `hosts` (Patroni's Citus
    /// mode): every process follows the coordinator's primary as [`Cluster::on_hosts`]
    /// does, without read replicas.
    pub fn on_coordinators(bin: PathBuf, hosts: &str) -> anyhow::Result<Self> {
        Self::build(
            bin,
            10_000_000,
            900,
            Database::Coordinators(hosts.to_owned()),
        )
    }

    fn build(
        bin: PathBuf,
        limit: u32,
        window_secs: u32,
        database: Database,
    ) -> anyhow::Result<Self> {
        // Each kind of deployment has directories of its own: one started while another
        // runs (the main one stays up through every scenario) must not empty its data
        // directory or its logs.
        let (hosts, citus_workers, replicas, own) = match database {
            Database::Single => (None, 0, false, ""),
            Database::Citus(workers) => (None, workers, false, "citus"),
            Database::Members(hosts) => (Some(hosts), 0, true, "failover"),
            Database::Coordinators(hosts) => (Some(hosts), 0, false, "citus-ha"),
        };
        let (postgres, workers) = if citus_workers == 0 {
            // With `hosts` it serves nothing: the processes connect to the hosts.
            let name = if own.is_empty() {
                "chaos-postgres".to_owned()
            } else {
                format!("chaos-postgres-{own}")
            };
            let single = crate::servers::postgres(&name, "-c max_connections=60")?;
            (single, Vec::new())
        } else {
            let cluster = crate::servers::citus("chaos-citus", citus_workers, CITUS_SETTINGS)?;
            crate::servers::citus_join(&cluster)?;
            (cluster.coordinator, cluster.workers)
        };
        let redis = crate::servers::redis()?;
        let proxy = FreezingProxy::start(([127, 0, 0, 1], postgres.port()).into())?;
        let logs = scratch_dir("chaos-logs")?.join(own);
        std::fs::create_dir_all(&logs)?;
        // Each run's logs, not every run's.
        for entry in std::fs::read_dir(&logs)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "log") {
                std::fs::remove_file(path)?;
            }
        }
        let mut cluster = Self {
            bin,
            postgres,
            citus_workers: workers,
            redis,
            proxy,
            secret_key: base64::engine::general_purpose::STANDARD.encode(rand_bytes()?),
            logs,
            binds: Vec::new(),
            apis: Vec::new(),
            workers: Vec::new(),
            worker_metrics: Vec::new(),
            customers: std::sync::atomic::AtomicU64::new(0),
            rate_limit: (limit.to_string(), window_secs.to_string()),
            hosts,
            replicas,
        };
        // As in production: an owner role migrates (and nothing else); the api, the worker
        // and the operator commands run as the runtime role it grants, never a superuser.
        // On Citus the coordinator creates the roles, and changes the database's owner, on
        // every node.
        cluster.psql(&format!("CREATE ROLE {OWNER} LOGIN"))?;
        cluster.psql(&format!("CREATE ROLE {ROLE} LOGIN"))?;
        cluster.psql(&format!("ALTER DATABASE postgres OWNER TO {OWNER}"))?;
        let owner_url = cluster.url_as(OWNER, &format!("127.0.0.1:{}", cluster.postgres.port()));
        api_json(
            &cluster.bin,
            &[("DATABASE_URL", &owner_url)],
            &["migrate", "--runtime-role", ROLE],
        )?;
        for i in 0..2 {
            cluster.binds.push(format!("127.0.0.1:{}", free_port()?));
            cluster.apis.push(None);
            cluster.start_api(i)?;
            cluster.workers.push(None);
            cluster
                .worker_metrics
                .push(format!("127.0.0.1:{}", free_port()?));
            cluster.start_worker(i)?;
        }
        Ok(cluster)
    }

    /// The base URLs of the API instances.
    pub fn bases(&self) -> Vec<String> {
        self.binds.iter().map(|b| format!("http://{b}")).collect()
    }

    /// posture's database URL; instance 1 goes through the proxy (but on hosts).
    fn database_url(&self, instance: usize) -> String {
        let host = if instance == 1 {
            self.proxy.addr().to_string()
        } else {
            format!("127.0.0.1:{}", self.postgres.port())
        };
        self.url_as(ROLE, &host)
    }

    /// The URL of the database as `role`, on `host` or on the cluster's members.
    fn url_as(&self, role: &str, host: &str) -> String {
        match &self.hosts {
            Some(hosts) => {
                format!("postgres://{role}@{hosts}/postgres?target_session_attrs=read-write")
            }
            None => format!("postgres://{role}@{host}/postgres"),
        }
    }

    fn log(&self, name: &str) -> anyhow::Result<Stdio> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.logs.join(format!("{name}.log")))?;
        Ok(Stdio::from(file))
    }

    fn command(&self, program: &str, instance: usize) -> Command {
        let mut command = Command::new(self.bin.join(program));
        command
            .env("DATABASE_URL", self.database_url(instance))
            .env("POSTURE_SECRET_KEY", &self.secret_key)
            .env("POSTURE_WEBHOOK_ALLOW_PRIVATE", "true")
            .env("POSTURE_LOG", "warn")
            .stdin(Stdio::null());
        command
    }

    pub fn start_api(&mut self, i: usize) -> anyhow::Result<()> {
        let mut command = self.command("posture-api", i);
        if let Some(hosts) = self.hosts.as_ref().filter(|_| self.replicas) {
            // Every member as a read replica too: through a failover one of them becomes
            // the primary (lag 0: still usable), the lost one stops answering (skipped), and
            // a former primary comes back as a replica.
            let replicas: Vec<String> = hosts
                .split(',')
                .map(|host| format!("postgres://{ROLE}@{host}/postgres"))
                .collect();
            command.env("POSTURE_DATABASE_READ_URL", replicas.join(","));
        }
        let child = command
            .arg("serve")
            .env("POSTURE_BIND", &self.binds[i])
            .env("REDIS_URL", self.redis.url())
            .env("POSTURE_RATE_LIMIT", &self.rate_limit.0)
            .env("POSTURE_RATE_WINDOW_SECS", &self.rate_limit.1)
            .env("POSTURE_WORKERS", "2")
            .env("POSTURE_SHUTDOWN_TIMEOUT_SECS", "10")
            .stdout(self.log(&format!("api-{i}"))?)
            .stderr(self.log(&format!("api-{i}"))?)
            .spawn()
            .context("starting posture-api serve")?;
        self.apis[i] = Some(child);
        wait_until_listening(&self.binds[i])
    }

    /// Starts worker `i` with the scenarios' short retry, lease, poll and timeout settings.
    pub fn start_worker(&mut self, i: usize) -> anyhow::Result<()> {
        self.start_worker_as(i, false)
    }

    /// Stops both workers and starts them again, with the settings of a deployment
    /// (`deployed`: the defaults, a receiver's 10 s included) or the scenarios' short ones.
    pub fn restart_workers(&mut self, deployed: bool) -> anyhow::Result<()> {
        for i in 0..self.workers.len() {
            self.signal_worker(i, "TERM")?;
            self.start_worker_as(i, deployed)?;
        }
        Ok(())
    }

    fn start_worker_as(&mut self, i: usize, deployed: bool) -> anyhow::Result<()> {
        let mut command = self.command("posture-worker", 0);
        if !deployed {
            command
                .env("POSTURE_WEBHOOK_RETRY_BASE_SECS", "1")
                .env("POSTURE_WORKER_LEASE_SECS", "5")
                .env("POSTURE_WORKER_POLL_SECS", "1")
                .env("POSTURE_WEBHOOK_TIMEOUT_SECS", "3");
        }
        let child = command
            .env("POSTURE_METRICS_BIND", &self.worker_metrics[i])
            .stdout(self.log(&format!("worker-{i}"))?)
            .stderr(self.log(&format!("worker-{i}"))?)
            .spawn()
            .context("starting posture-worker")?;
        self.workers[i] = Some(child);
        Ok(())
    }

    /// Sends `signal` (`KILL`, `TERM`) to API instance `i` and waits for it to exit.
    pub fn signal_api(&mut self, i: usize, signal: &str) -> anyhow::Result<()> {
        stop(self.apis[i].take(), signal)
    }

    pub fn signal_worker(&mut self, i: usize, signal: &str) -> anyhow::Result<()> {
        stop(self.workers[i].take(), signal)
    }

    /// The delivery attempts worker `i` has made since it started (its
    /// `posture_webhook_attempts_total`, every outcome and receiver); `None` when its
    /// metrics do not answer.
    pub fn worker_attempts(&self, i: usize) -> Option<f64> {
        let url = format!("http://{}/metrics", self.worker_metrics[i]);
        let text = super::block_on(async {
            let response = reqwest::get(url).await.ok()?.error_for_status().ok()?;
            response.text().await.ok()
        })
        .ok()??;
        Some(
            text.lines()
                .filter(|line| line.starts_with("posture_webhook_attempts_total"))
                .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
                .sum(),
        )
    }

    /// The running posture processes: (name, pid).
    pub fn pids(&self) -> Vec<(String, u32)> {
        let apis = self
            .apis
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("api-{i}"), c));
        let workers = self
            .workers
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("worker-{i}"), c));
        apis.chain(workers)
            .filter_map(|(name, child)| Some((name, child.as_ref()?.id())))
            .collect()
    }

    /// Runs a `posture-api` operator command; returns its JSON.
    pub fn cli(&self, args: &[&str]) -> anyhow::Result<Value> {
        api_json(&self.bin, &[("DATABASE_URL", &self.database_url(0))], args)
    }

    /// Runs a `posture-api` operator command; returns whether it succeeded.
    pub fn cli_succeeds(&self, args: &[&str]) -> bool {
        self.command("posture-api", 0)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Starts a `posture-api` operator command without waiting for it.
    pub fn spawn_cli(&self, args: &[&str]) -> anyhow::Result<Child> {
        Ok(self
            .command("posture-api", 0)
            .args(args)
            .stdout(Stdio::null())
            .stderr(self.log("commands")?)
            .spawn()?)
    }

    /// Another key of `customer`'s, holding every scope.
    pub fn key(&self, customer: &Customer) -> anyhow::Result<String> {
        let mut args = vec!["keys", "issue", "--customer", &customer.id];
        for scope in SCOPES {
            args.extend(["--scope", scope]);
        }
        Ok(self.cli(&args)?["key"].as_str().context("key")?.to_owned())
    }

    /// A customer with a pass of 2,000 findings to read, for the load.
    pub fn reader(&self, tag: &str) -> anyhow::Result<Customer> {
        let customer = self.customer(&format!("Chaos load {tag}"))?;
        self.give_reads(&customer, tag)?;
        Ok(customer)
    }

    /// A pass of 2,000 findings for `customer` to read, their ids prefixed `l{tag}-`.
    pub fn give_reads(&self, customer: &Customer, tag: &str) -> anyhow::Result<()> {
        self.ingest(customer, &format!("l{tag}-"), 2000).map(|_| ())
    }

    /// The first value `sql` returns (run as the superuser).
    pub fn psql(&self, sql: &str) -> anyhow::Result<String> {
        let host = format!("127.0.0.1:{}", self.postgres.port());
        psql_value(&self.url_as("postgres", &host), sql)
    }

    /// A number `sql` returns.
    pub fn count(&self, sql: &str) -> anyhow::Result<i64> {
        Ok(self.psql(sql)?.parse()?)
    }

    /// A new customer with a tenant of its own and a key holding every scope.
    pub fn customer(&self, name: &str) -> anyhow::Result<Customer> {
        let tenant = format!(
            "5f0c2a61-7a3b-4d2e-8c1f-{:012x}",
            self.customers
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let id = self.cli(&["customers", "create", "--name", name])?["id"]
            .as_str()
            .context("customer id")?
            .to_owned();
        self.cli(&[
            "tenants",
            "add",
            "--customer",
            &id,
            "--tenant-id",
            &tenant,
            "--name",
            name,
        ])?;
        let mut args = vec!["keys", "issue", "--customer", &id];
        for scope in SCOPES {
            args.extend(["--scope", scope]);
        }
        let issued = self.cli(&args)?;
        Ok(Customer {
            tenant,
            key: issued["key"].as_str().context("key")?.to_owned(),
            id,
        })
    }

    /// Ingests a pass of `findings` new findings (ids `{prefix}{n}`) for `customer`.
    pub fn ingest(
        &self,
        customer: &Customer,
        prefix: &str,
        findings: usize,
    ) -> anyhow::Result<Value> {
        let file = self.pass_file(&customer.tenant, prefix, findings)?;
        self.cli(&["ingest", "--customer", &customer.id, path(&file)?])
    }

    /// Writes a pass file of `findings` new findings for `tenant`.
    pub fn pass_file(
        &self,
        tenant: &str,
        prefix: &str,
        findings: usize,
    ) -> anyhow::Result<PathBuf> {
        let file = self.logs.join(format!("pass-{prefix}.jsonl"));
        write_new_findings_pass(&file, tenant, prefix, findings)?;
        Ok(file)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in self.apis.iter_mut().chain(self.workers.iter_mut()) {
            let _ = stop(child.take(), "TERM");
        }
    }
}

/// The runtime role posture's processes connect as (granted by `migrate --runtime-role`).
pub const ROLE: &str = "posture";

/// The role that owns the schema and runs `migrate` only.
const OWNER: &str = "posture_owner";

fn path(file: &Path) -> anyhow::Result<&str> {
    file.to_str().context("a path that is not UTF-8")
}

fn stop(child: Option<Child>, signal: &str) -> anyhow::Result<()> {
    if let Some(mut child) = child {
        Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()?;
        child.wait()?;
    }
    Ok(())
}
