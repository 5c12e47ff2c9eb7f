//! Throwaway PostgreSQL and Redis servers for tests, the demo and benchmarks.
//!
//! PostgreSQL refuses to run as root: when xtask runs as root, the cluster directory is
//! given to the `postgres` user and `initdb`/`pg_ctl` run through `runuser`. Both servers
//! listen on free loopback ports, keep their files under `target/xtask/`, and are stopped
//! (and their files removed) when the value is dropped.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use crate::util::{eprintln_status, free_port, on_path, run};

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// The directory of `initdb` and `pg_ctl`: on PATH, or Debian's versioned directory.
fn postgres_bin() -> Option<PathBuf> {
    if let Some(initdb) = on_path("initdb") {
        return initdb.parent().map(Path::to_path_buf);
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    versions.sort();
    versions.pop()
}

/// A PostgreSQL cluster of our own.
pub struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
    as_postgres: bool,
    /// The URL of its `postgres` database.
    pub url: String,
}

impl Postgres {
    pub fn start(dir: &Path) -> anyhow::Result<Self> {
        Self::start_with(dir, "")
    }

    /// Starts with extra server settings (`-c name=value ...`), e.g. for benchmarks.
    pub fn start_with(dir: &Path, settings: &str) -> anyhow::Result<Self> {
        let Some(bin) = postgres_bin() else {
            bail!(
                "PostgreSQL server binaries (initdb, pg_ctl) were not found. Install PostgreSQL \
                 (Debian/Ubuntu: apt-get install -y postgresql), or point DATABASE_URL \
                 (TEST_DATABASE_URL for tests) at a server of yours"
            );
        };
        let as_postgres = is_root();
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        std::fs::create_dir_all(dir)?;
        if as_postgres {
            run(Command::new("chown").arg("postgres").arg(dir))?;
        }
        let port = free_port()?;
        let this = Self {
            dir: dir.to_path_buf(),
            bin,
            as_postgres,
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        };
        let data = dir.join("data");
        let started = Instant::now();
        this.command("initdb")
            .args(["-D"])
            .arg(&data)
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .output()
            .context("running initdb")
            .and_then(|o| {
                if o.status.success() {
                    Ok(())
                } else {
                    bail!("initdb failed: {}", String::from_utf8_lossy(&o.stderr))
                }
            })?;
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off \
             -c full_page_writes=off -c max_connections=300 {settings}",
            dir.display()
        );
        let log = dir.join("postgres.log");
        let status = this
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .args(["-w", "-l"])
            .arg(&log)
            .args(["-o", &options, "start"])
            .stdout(std::process::Stdio::null())
            .status()
            .context("running pg_ctl start")?;
        if !status.success() {
            bail!("PostgreSQL did not start; see {}", log.display());
        }
        eprintln_status(&format!(
            "PostgreSQL on 127.0.0.1:{port} (started in {:.1} s)",
            started.elapsed().as_secs_f64()
        ));
        Ok(this)
    }

    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "stop"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis server of our own.
pub struct Redis {
    dir: PathBuf,
    pub url: String,
}

impl Redis {
    pub fn start(dir: &Path) -> anyhow::Result<Self> {
        let Some(server) = on_path("redis-server") else {
            bail!(
                "redis-server was not found. Install Redis (Debian/Ubuntu: apt-get install -y \
                 redis-server), or point TEST_REDIS_URL at a server of yours"
            );
        };
        std::fs::create_dir_all(dir)?;
        let port = free_port()?;
        let pidfile = dir.join("redis.pid");
        run(Command::new(server)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--daemonize", "yes", "--pidfile"])
            .arg(&pidfile)
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(dir.join("redis.log")))?;
        // Wait until it accepts connections.
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                bail!(
                    "Redis did not start; see {}",
                    dir.join("redis.log").display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln_status(&format!("Redis on 127.0.0.1:{port}"));
        Ok(Self {
            dir: dir.to_path_buf(),
            url: format!("redis://127.0.0.1:{port}"),
        })
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("redis.pid")) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
