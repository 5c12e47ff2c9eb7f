//! Throwaway PostgreSQL and Redis servers: for `cargo xtask test|demo|bench`, and for tests
//! that stop and restart a server to check outages.
//!
//! PostgreSQL refuses to run as root: as root, the cluster directory is given to the
//! `postgres` user and `initdb`/`pg_ctl` run through `runuser`. Servers listen on free
//! loopback ports and keep their files in a directory of their own, removed on drop.

use std::{
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// A problem starting a server, with what to do about it.
#[derive(Debug)]
pub struct ServerError(pub String);

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ServerError {}

type Result<T> = std::result::Result<T, ServerError>;

fn on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn free_port() -> Result<u16> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| ServerError(format!("no free port: {e}")))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn wait_for_port(port: u16, what: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(ServerError(format!(
                "{what} did not start listening on {port}"
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// The directory of `initdb`, `pg_ctl` and `pg_basebackup`: where the `initdb` on PATH
/// really is (links resolved: a link on PATH may stand alone), or Debian's versioned
/// directory.
pub fn postgres_bin() -> Option<PathBuf> {
    if let Some(initdb) = on_path("initdb") {
        let initdb = std::fs::canonicalize(&initdb).unwrap_or(initdb);
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

/// A locale compiled from the system's sources (`localedef`, which the C library ships) into
/// `dir`, for a server started with `LOCPATH=dir`: a test of a server whose messages are in
/// another language needs no locale installed system-wide. `name` is like `de_DE`; the
/// locale is `<name>.UTF-8`.
pub fn compile_locale(name: &str, dir: &Path) -> Result<String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| ServerError(format!("creating {}: {e}", dir.display())))?;
    let target = dir.join(format!("{name}.UTF-8"));
    let output = Command::new("localedef")
        .args(["-i", name, "-f", "UTF-8"])
        .arg(&target)
        .output()
        .map_err(|e| {
            ServerError(format!(
                "localedef: {e} (Debian/Ubuntu: apt-get install -y libc-bin locales)"
            ))
        })?;
    // localedef exits 1 for warnings while writing the locale; what counts is the locale.
    if !target.join("LC_MESSAGES").exists() {
        return Err(ServerError(format!(
            "localedef -i {name} made no locale: {} (Debian/Ubuntu: apt-get install -y locales)",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    for path in [dir.to_path_buf(), target] {
        let _ =
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755));
    }
    Ok(format!("{name}.UTF-8"))
}

/// A PostgreSQL cluster of our own.
pub struct PostgresServer {
    dir: PathBuf,
    bin: PathBuf,
    as_postgres: bool,
    port: u16,
    settings: String,
    /// Environment of the server process (`LOCPATH` for a locale of its own).
    env: Vec<(String, String)>,
    /// The URL of its `postgres` database.
    pub url: String,
}

impl PostgresServer {
    /// A new cluster in `dir` (emptied first), with extra server settings
    /// (`-c name=value ...`), started.
    pub fn start(dir: &Path, settings: &str) -> Result<Self> {
        Self::start_with_env(dir, settings, &[])
    }

    /// [`PostgresServer::start`] with variables added to the server's environment.
    pub fn start_with_env(dir: &Path, settings: &str, env: &[(&str, &str)]) -> Result<Self> {
        let bin = postgres_bin().ok_or_else(|| {
            ServerError(
                "PostgreSQL server binaries (initdb, pg_ctl) were not found. Install PostgreSQL \
                 (Debian/Ubuntu: apt-get install -y postgresql), or point DATABASE_URL \
                 (TEST_DATABASE_URL for tests) at a server of yours"
                    .to_owned(),
            )
        })?;
        let mut server = Self::prepare(dir, bin, settings)?;
        server.env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let data = dir.join("data");
        server.run(
            server.command("initdb").arg("-D").arg(&data).args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ]),
            "initdb",
        )?;
        server.restart()?;
        Ok(server)
    }

    /// A streaming standby of this server in `dir` (emptied first): a base backup
    /// (`pg_basebackup -R`, which writes `primary_conninfo` and `standby.signal`), started
    /// as a hot standby on a port of its own.
    pub fn start_standby(&self, dir: &Path) -> Result<Self> {
        let standby = Self::prepare(dir, self.bin.clone(), &self.settings)?;
        standby.run(
            standby
                .command("pg_basebackup")
                .arg("-D")
                .arg(dir.join("data"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args([
                    "-U",
                    "postgres",
                    "-R",
                    "-X",
                    "stream",
                    "-c",
                    "fast",
                    "--no-sync",
                ]),
            "pg_basebackup",
        )?;
        standby.restart()?;
        Ok(standby)
    }

    /// A server value for a new cluster directory `dir` (emptied, owned by the server's
    /// user) on a free port; nothing is started.
    fn prepare(dir: &Path, bin: PathBuf, settings: &str) -> Result<Self> {
        let as_postgres = is_root();
        if dir.exists() {
            std::fs::remove_dir_all(dir)
                .map_err(|e| ServerError(format!("removing {}: {e}", dir.display())))?;
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| ServerError(format!("creating {}: {e}", dir.display())))?;
        let port = free_port()?;
        let server = Self {
            dir: dir.to_path_buf(),
            bin,
            as_postgres,
            port,
            settings: settings.to_owned(),
            env: Vec::new(),
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        };
        if as_postgres {
            server.run(Command::new("chown").arg("postgres").arg(dir), "chown")?;
        }
        Ok(server)
    }

    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        };
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    fn run(&self, command: &mut Command, what: &str) -> Result<()> {
        let output = command
            .output()
            .map_err(|e| ServerError(format!("{what}: {e}")))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(ServerError(format!(
                "{what} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            )))
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster's data directory (`postmaster.pid` names its postmaster).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The URL of another database of this server.
    pub fn database_url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Stops it, as an outage would (in-flight connections are cut).
    pub fn stop(&self) {
        self.pg_ctl_stop("fast");
    }

    fn pg_ctl_stop(&self, mode: &str) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", mode, "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// Stops it as a crash would: `pg_ctl stop -m immediate` (no checkpoint, connections cut,
    /// what a `kill -9` of the postmaster leaves to a standby).
    pub fn crash(&self) {
        self.pg_ctl_stop("immediate");
    }

    /// Promotes a standby to primary (`pg_ctl promote`, waiting until it accepts writes).
    pub fn promote(&self) -> Result<()> {
        self.run(
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.dir.join("data"))
                .args(["-w", "promote"])
                .stdout(Stdio::null()),
            "pg_ctl promote",
        )
    }

    /// Starts it (again), on the same port and data.
    pub fn restart(&self) -> Result<()> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off \
             -c full_page_writes=off -c max_connections=300 {}",
            self.port,
            self.dir.display(),
            self.settings
        );
        let log = self.dir.join("postgres.log");
        self.run(
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.dir.join("data"))
                .args(["-w", "-l"])
                .arg(&log)
                .args(["-o", &options, "start"])
                .stdout(Stdio::null()),
            "pg_ctl start",
        )
        .map_err(|e| ServerError(format!("{e} (see {})", log.display())))?;
        wait_for_port(self.port, "PostgreSQL")
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `redis-server` child process on a fixed loopback port.
pub struct RedisServer {
    port: u16,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts one on a free port (needs `redis-server` on PATH).
    pub fn start() -> Result<Self> {
        if on_path("redis-server").is_none() {
            return Err(ServerError(
                "redis-server was not found. Install Redis (Debian/Ubuntu: apt-get install -y \
                 redis-server), or point TEST_REDIS_URL at a server of yours"
                    .to_owned(),
            ));
        }
        let mut server = Self {
            port: free_port()?,
            child: None,
        };
        server.restart()?;
        Ok(server)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills it (as an outage would).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port (empty: nothing is persisted).
    pub fn restart(&mut self) -> Result<()> {
        self.stop();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| ServerError(format!("starting redis-server: {e}")))?;
        self.child = Some(child);
        wait_for_port(self.port, "Redis")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
