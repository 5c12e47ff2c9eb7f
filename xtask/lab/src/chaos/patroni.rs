//! A Patroni cluster on this machine for the failover scenarios: one etcd and three
//! PostgreSQL members managed by Patroni, on loopback ports, as the `postgres` user when run
//! as root (PostgreSQL refuses root). No containers: Debian's `patroni` and `etcd-server`.
//!
//! Or, in Patroni's Citus mode ([`Patroni::start_citus`]), a Citus cluster whose every node
//! group (0: the coordinator, 1..: the workers) is a primary and a standby: Patroni fails
//! each group over by itself and keeps the coordinator's `pg_dist_node` pointing at each
//! worker group's primary.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::{
    files::scratch_dir,
    process::{on_path, output},
    servers::free_port,
};

/// Members of the cluster.
const MEMBERS: usize = 3;
/// The leader lock's TTL: a leader that stops renewing it loses it after this long (Patroni's
/// default is 30 s; 10 s keeps the scenarios short and is what a latency-sensitive
/// deployment would choose).
pub const TTL_SECS: u64 = 10;

struct Member {
    name: String,
    /// Its Citus group (0: the coordinator), in Citus mode.
    group: Option<u32>,
    pg_port: u16,
    rest_port: u16,
    config: PathBuf,
    data: PathBuf,
    child: Option<Child>,
}

pub struct Patroni {
    dir: PathBuf,
    etcd: Child,
    members: Vec<Member>,
    as_postgres: bool,
}

fn is_root() -> bool {
    output(Command::new("id").arg("-u")).is_ok_and(|id| id.trim() == "0")
}

/// The command, as the `postgres` user when we are root.
fn as_user(as_postgres: bool, program: &str) -> Command {
    if as_postgres {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--", program]);
        command
    } else {
        Command::new(program)
    }
}

impl Patroni {
    /// Starts etcd and three members (`synchronous`: Patroni's `synchronous_mode`, so that a
    /// commit is acknowledged only once a standby has it); returns once there is a leader and
    /// every replica streams.
    pub fn start(synchronous: bool) -> anyhow::Result<Self> {
        Self::start_groups(synchronous, &[None; MEMBERS])
    }

    /// Citus: a coordinator group and `workers` worker groups of two members each, in
    /// Patroni's Citus mode (the `citus` section: Patroni creates the extension and
    /// registers each group's primary with the coordinator).
    pub fn start_citus(synchronous: bool, workers: u32) -> anyhow::Result<Self> {
        xtask::citus::ensure()?;
        let groups: Vec<Option<u32>> = (0..=workers).flat_map(|g| [Some(g), Some(g)]).collect();
        Self::start_groups(synchronous, &groups)
    }

    fn start_groups(synchronous: bool, groups: &[Option<u32>]) -> anyhow::Result<Self> {
        for program in ["patroni", "patronictl", "etcd"] {
            if on_path(program).is_none() {
                bail!(
                    "{program} was not found: the failover scenarios need Patroni and etcd \
                     (cargo xtask setup chaos, or apt-get install -y patroni etcd-server)"
                );
            }
        }
        let dir = scratch_dir("chaos-patroni")?;
        std::fs::remove_dir_all(&dir)?;
        std::fs::create_dir_all(&dir)?;
        let as_postgres = is_root();
        if as_postgres {
            output(Command::new("chown").arg("postgres").arg(&dir))?;
        }
        let log = |name: &str| -> anyhow::Result<Stdio> {
            Ok(Stdio::from(std::fs::File::create(
                dir.join(format!("{name}.log")),
            )?))
        };
        let (client, peer) = (free_port()?, free_port()?);
        let etcd = as_user(as_postgres, "etcd")
            .args(["--name", "e1", "--data-dir"])
            .arg(dir.join("etcd"))
            .args([
                "--listen-client-urls",
                &format!("http://127.0.0.1:{client}"),
                "--advertise-client-urls",
                &format!("http://127.0.0.1:{client}"),
                "--listen-peer-urls",
                &format!("http://127.0.0.1:{peer}"),
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{peer}"),
                "--initial-cluster",
                &format!("e1=http://127.0.0.1:{peer}"),
            ])
            .stdout(log("etcd")?)
            .stderr(log("etcd")?)
            .spawn()
            .context("starting etcd")?;
        crate::binaries::wait_until_listening(&format!("127.0.0.1:{client}"))?;
        let mut cluster = Self {
            dir: dir.clone(),
            etcd,
            members: Vec::new(),
            as_postgres,
        };
        for (i, group) in groups.iter().enumerate() {
            let name = match group {
                Some(g) => format!("g{g}m{}", i % 2 + 1),
                None => format!("pg{}", i + 1),
            };
            let member = Member {
                name,
                group: *group,
                pg_port: free_port()?,
                rest_port: free_port()?,
                config: dir.join(format!("member{i}.yml")),
                data: dir.join(format!("data{i}")),
                child: None,
            };
            std::fs::write(&member.config, config(&member, &dir, client, synchronous))?;
            cluster.members.push(member);
            cluster.start_member(i)?;
        }
        cluster.wait_until_healthy(Duration::from_secs(90))?;
        Ok(cluster)
    }

    /// Starts a member stopped by [`Patroni::kill_member`] again: it rejoins its group as a
    /// standby (rewound when it was the primary).
    pub fn restart_member(&mut self, name: &str) -> anyhow::Result<()> {
        let i = self.member(name)?;
        self.start_member(i)
    }

    fn start_member(&mut self, i: usize) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{}.log", self.members[i].name)))?;
        let child = as_user(self.as_postgres, "patroni")
            .arg(&self.members[i].config)
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .context("starting patroni")?;
        self.members[i].child = Some(child);
        Ok(())
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`: every member, for `DATABASE_URL`.
    pub fn hosts(&self) -> String {
        self.hosts_of(None)
    }

    /// The members of a Citus group (0: the coordinator's), for `DATABASE_URL`.
    pub fn hosts_of(&self, group: Option<u32>) -> String {
        self.members
            .iter()
            .filter(|m| m.group == group)
            .map(|m| format!("127.0.0.1:{}", m.pg_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The groups: `[None]`, or the Citus groups.
    fn groups(&self) -> Vec<Option<u32>> {
        let mut groups: Vec<Option<u32>> = self.members.iter().map(|m| m.group).collect();
        groups.dedup();
        groups
    }

    /// A group as Patroni's REST API describes it (any of its members that answers).
    fn cluster(&self, group: Option<u32>) -> Option<Value> {
        self.members
            .iter()
            .filter(|m| m.group == group)
            .find_map(|m| {
                let text = output(Command::new("curl").args([
                    "-sf",
                    "--max-time",
                    "2",
                    &format!("http://127.0.0.1:{}/cluster", m.rest_port),
                ]))
                .ok()?;
                serde_json::from_str(&text).ok()
            })
    }

    /// The running leader's name.
    pub fn leader(&self) -> Option<String> {
        self.leader_of(None)
    }

    /// The running leader of a group.
    pub fn leader_of(&self, group: Option<u32>) -> Option<String> {
        let cluster = self.cluster(group)?;
        cluster["members"].as_array()?.iter().find_map(|m| {
            (m["role"] == "leader" && m["state"] == "running")
                .then(|| m["name"].as_str().map(str::to_owned))
                .flatten()
        })
    }

    /// Waits for a running leader and every other member streaming from it, in every
    /// group.
    pub fn wait_until_healthy(&self, bound: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + bound;
        let groups = self.groups();
        while !groups.iter().all(|g| self.healthy(*g)) {
            if Instant::now() > deadline {
                bail!(
                    "the Patroni cluster did not become healthy within {bound:?} (logs in {})",
                    self.dir.display()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Ok(())
    }

    /// Whether a group has a running leader and its other members stream from it.
    fn healthy(&self, group: Option<u32>) -> bool {
        let size = self.members.iter().filter(|m| m.group == group).count();
        let Some(cluster) = self.cluster(group) else {
            return false;
        };
        let members = cluster["members"].as_array().cloned().unwrap_or_default();
        let leader = members
            .iter()
            .any(|m| m["role"] == "leader" && m["state"] == "running");
        // Patroni before 3.0.4 says `running` of a streaming replica.
        let streaming = members
            .iter()
            .filter(|m| {
                m["role"] != "leader"
                    && (m["state"] == "streaming" || m["state"] == "running")
                    && m["lag"].is_u64()
            })
            .count();
        leader && streaming == size - 1
    }

    /// Waits for a running leader of `old`'s group other than `old`; returns its name.
    pub fn wait_for_leader_other_than(&self, old: &str, bound: Duration) -> anyhow::Result<String> {
        let group = self.members[self.member(old)?].group;
        let deadline = Instant::now() + bound;
        loop {
            if let Some(leader) = self.leader_of(group).filter(|l| l != old) {
                return Ok(leader);
            }
            if Instant::now() > deadline {
                bail!("no new leader within {bound:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn member(&self, name: &str) -> anyhow::Result<usize> {
        self.members
            .iter()
            .position(|m| m.name == name)
            .with_context(|| format!("no member {name}"))
    }

    /// The leader's machine is lost: its Patroni and its postmaster are killed (`kill -9`).
    pub fn kill_member(&mut self, name: &str) -> anyhow::Result<()> {
        let i = self.member(name)?;
        let member = &mut self.members[i];
        let postmaster = std::fs::read_to_string(member.data.join("postmaster.pid"))
            .ok()
            .and_then(|text| text.lines().next().map(str::to_owned));
        let patroni = output(
            Command::new("pgrep").args(["-f", &format!("patroni {}", member.config.display())]),
        )
        .unwrap_or_default();
        for pid in patroni.split_whitespace().chain(postmaster.as_deref()) {
            let _ = Command::new("kill")
                .args(["-9", pid])
                .stderr(Stdio::null())
                .status();
        }
        if let Some(mut child) = member.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        Ok(())
    }

    /// The PostgreSQL port of a member.
    pub fn pg_port(&self, name: &str) -> anyhow::Result<u16> {
        Ok(self.members[self.member(name)?].pg_port)
    }

    /// A planned switchover to another member of its group (`patronictl switchover
    /// --force`, with `--group` in Citus mode).
    pub fn switchover(&self, from: &str) -> anyhow::Result<()> {
        let group = self.members[self.member(from)?].group;
        let to = self
            .members
            .iter()
            .find(|m| m.name != from && m.group == group)
            .context("a candidate")?;
        let mut command = as_user(self.as_postgres, "patronictl");
        command.arg("-c").arg(&self.members[0].config).args([
            "switchover",
            "--leader",
            from,
            "--candidate",
            &to.name,
            "--force",
        ]);
        if let Some(group) = group {
            command.args(["--group", &group.to_string()]);
        }
        output(&mut command)?;
        Ok(())
    }
}

impl Drop for Patroni {
    fn drop(&mut self) {
        let names: Vec<String> = self.members.iter().map(|m| m.name.clone()).collect();
        for name in names {
            let _ = self.kill_member(&name);
        }
        // The child is `runuser` when root: etcd itself is found by its data directory.
        let _ = Command::new("pkill")
            .args([
                "-9",
                "-f",
                &format!(
                    "etcd --name e1 --data-dir {}",
                    self.dir.join("etcd").display()
                ),
            ])
            .status();
        let _ = self.etcd.kill();
        let _ = self.etcd.wait();
    }
}

/// One member's Patroni configuration.
fn config(member: &Member, dir: &Path, etcd: u16, synchronous: bool) -> String {
    format!(
        r#"scope: posture-chaos
namespace: /posture/
name: {name}
restapi:
  listen: 127.0.0.1:{rest}
  connect_address: 127.0.0.1:{rest}
etcd3:
  hosts: 127.0.0.1:{etcd}
{citus}bootstrap:
  dcs:
    ttl: {TTL_SECS}
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: 1048576
    synchronous_mode: {synchronous}
    postgresql:
      use_pg_rewind: true
      parameters:
        max_connections: 100
        wal_level: replica
{citus_parameters}        hot_standby: "on"
        wal_log_hints: "on"
  initdb:
  - encoding: UTF8
  - auth: trust
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{pg}
  connect_address: 127.0.0.1:{pg}
  data_dir: {data}
  bin_dir: {bin}
  # A standby is made at once, not after a spread checkpoint of the primary.
  basebackup:
  - checkpoint: fast
  pgpass: {dir}/pgpass-{name}
  authentication:
    replication: {{username: replicator, password: replicator}}
    superuser: {{username: postgres, password: postgres}}
    rewind: {{username: rewinder, password: rewinder}}
  parameters:
    unix_socket_directories: {dir}
"#,
        name = member.name,
        rest = member.rest_port,
        pg = member.pg_port,
        data = member.data.display(),
        bin = posture_test_support::servers::postgres_bin()
            .map(|b| b.display().to_string())
            .unwrap_or_default(),
        dir = dir.display(),
        // Patroni's Citus mode: its group, the database that holds the extension; Patroni
        // adds `citus` to `shared_preload_libraries` and sets `wal_level` to logical.
        citus = member.group.map_or_else(String::new, |group| {
            format!("citus:\n  group: {group}\n  database: postgres\n")
        }),
        // Two-phase commits across nodes; 4 shards, as the tests' clusters.
        citus_parameters = if member.group.is_some() {
            "        max_prepared_transactions: 200\n        citus.shard_count: 4\n"
        } else {
            ""
        },
    )
}
