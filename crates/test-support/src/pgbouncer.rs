//! A throwaway PgBouncer in transaction mode in front of the test PostgreSQL server.
//!
//! The binary is `TEST_PGBOUNCER` (set by `cargo xtask test`, which builds PgBouncer 1.24.1
//! into `target/pgbouncer` when the machine has none recent enough) or `pgbouncer` on PATH.
//! Transaction pooling with posture's prepared statements needs PgBouncer 1.21 or later
//! (`max_prepared_statements`); an older one is refused with that reason.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

/// PgBouncer as a child process, killed on drop.
pub struct PgBouncer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

fn binary() -> PathBuf {
    let path = std::env::var_os("TEST_PGBOUNCER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("pgbouncer"));
    let version = Command::new(&path)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "PgBouncer ({}) cannot run: {e}. Run the tests with `cargo xtask test`, which \
                 builds PgBouncer 1.24.1 into target/pgbouncer, or set TEST_PGBOUNCER",
                path.display()
            )
        });
    let text = String::from_utf8_lossy(&version.stdout);
    let (major, minor) = text
        .split_whitespace()
        .nth(1)
        .and_then(|v| {
            let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next()??))
        })
        .unwrap_or((0, 0));
    assert!(
        (major, minor) >= (1, 21),
        "{} is {text:?}: transaction pooling with prepared statements needs PgBouncer 1.21 or \
         later (max_prepared_statements); `cargo xtask test` builds 1.24.1",
        path.display()
    );
    path
}

impl PgBouncer {
    /// PgBouncer on a free port in front of the server at `backend` (host, port), pooling
    /// per transaction onto at most `server_connections` connections per user and database.
    pub fn start(backend: std::net::SocketAddr, server_connections: u32) -> Self {
        let binary = binary();
        let dir = std::env::temp_dir().join(format!(
            "posture-pgbouncer-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // The test server trusts loopback; PgBouncer only needs to know the users.
        std::fs::write(
            dir.join("users.txt"),
            format!("\"postgres\" \"\"\n\"{0}\" \"{0}\"\n", crate::RUNTIME_ROLE),
        )
        .unwrap();
        let config = format!(
            "[databases]\n* = host={host} port={backend_port}\n\n[pgbouncer]\n\
             listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
             auth_type = trust\nauth_file = {dir}/users.txt\npool_mode = transaction\n\
             default_pool_size = {server_connections}\nmax_client_conn = 500\n\
             max_prepared_statements = 500\nlogfile = {dir}/pgbouncer.log\n",
            host = backend.ip(),
            backend_port = backend.port(),
            dir = dir.display(),
        );
        std::fs::write(dir.join("pgbouncer.ini"), config).unwrap();
        let mut command = Command::new(&binary);
        command
            .arg(dir.join("pgbouncer.ini"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // PgBouncer refuses to run as root: as root, it runs as the postgres user.
        if Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
        {
            let id = |flag: &str| -> u32 {
                let out = Command::new("id")
                    .args([flag, "postgres"])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
            };
            let status = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(&dir)
                .status();
            assert!(status.is_ok_and(|s| s.success()));
            std::os::unix::process::CommandExt::uid(&mut command, id("-u"));
            std::os::unix::process::CommandExt::gid(&mut command, id("-g"));
        }
        let child = command.spawn().unwrap();
        let what = format!("PgBouncer (its log: {}/pgbouncer.log)", dir.display());
        crate::waits::wait_for_port(&what, port, Duration::from_secs(10));
        Self { child, port, dir }
    }

    /// `url` (a URL of the test server) with PgBouncer in its place.
    pub fn url(&self, url: &str) -> String {
        let mut url = url::Url::parse(url).unwrap();
        url.set_ip_host([127, 0, 0, 1].into()).unwrap();
        url.set_port(Some(self.port)).unwrap();
        url.into()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
