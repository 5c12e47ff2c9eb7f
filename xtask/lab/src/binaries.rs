//! posture's binaries as the tasks run them: built once, operator commands with `--json`,
//! long-running processes stopped gracefully with the task.

use std::{
    io::BufWriter,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::{
    demo_data::{CustomerSpec, today, write_customer},
    files::project_root,
    process::{eprintln_status, output, run},
};

/// Builds `posture-api`, `posture-worker` and the customers' `posture` (debug); returns their
/// directory.
pub fn build_binaries() -> anyhow::Result<PathBuf> {
    build_binaries_as(false)
}

/// Builds `posture-api`, `posture-worker` and the customers' `posture`, optimised when
/// `release`; returns their directory.
pub fn build_binaries_as(release: bool) -> anyhow::Result<PathBuf> {
    build_binaries_with(release, &[])
}

/// [`build_binaries_as`], with the packages in `more` built in the same cargo run (so their
/// shared dependencies are built once, with the same features).
pub fn build_binaries_with(release: bool, more: &[&str]) -> anyhow::Result<PathBuf> {
    let profile = if release { "release" } else { "debug" };
    eprintln_status(&format!(
        "building posture-api, posture-worker and posture ({profile})"
    ));
    let mut cargo = crate::process::cargo();
    cargo.current_dir(project_root()).args([
        "build",
        "--quiet",
        "-p",
        "posture-api",
        "-p",
        "posture-worker",
        "-p",
        "posture-cli",
    ]);
    for package in more {
        cargo.args(["-p", package]);
    }
    if release {
        cargo.arg("--release");
    }
    run(&mut cargo)?;
    Ok(project_root().join("target").join(profile))
}

/// Runs a `posture-api` operator command with `--json`; returns its object.
pub fn api_json(bin: &Path, env: &[(&str, &str)], args: &[&str]) -> anyhow::Result<Value> {
    let mut command = Command::new(bin.join("posture-api"));
    command.args(args).arg("--json").env("POSTURE_LOG", "warn");
    for (k, v) in env {
        command.env(k, v);
    }
    let text = output(&mut command)?;
    serde_json::from_str(text.trim()).with_context(|| format!("parsing the output of {args:?}"))
}

/// `posture-api serve` on `bind` with `env`'s settings, its log (stderr) written to `log`;
/// the caller adds the settings of its own run.
pub fn api_serve(
    bin: &Path,
    env: &[(&str, &str)],
    bind: &str,
    log: &Path,
) -> anyhow::Result<Command> {
    let mut serve = Command::new(bin.join("posture-api"));
    serve
        .arg("serve")
        .envs(env.iter().copied())
        .env("POSTURE_BIND", bind)
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(log)?);
    Ok(serve)
}

/// Creates a customer with the operator CLI; returns its id.
pub fn create_customer(bin: &Path, env: &[(&str, &str)], name: &str) -> anyhow::Result<String> {
    Ok(
        api_json(bin, env, &["customers", "create", "--name", name])?["id"]
            .as_str()
            .context("customer id")?
            .to_owned(),
    )
}

/// Writes the demo data of `spec` (as of today) to `file` and ingests it for `customer`
/// through the real `posture-api ingest`; returns the pass summary.
pub fn ingest_demo_data(
    bin: &Path,
    env: &[(&str, &str)],
    customer: &str,
    spec: &CustomerSpec,
    file: &Path,
) -> anyhow::Result<Value> {
    let mut out = BufWriter::new(std::fs::File::create(file)?);
    write_customer(spec, today(), &mut out)?;
    std::io::Write::flush(&mut out)?;
    drop(out);
    let path = file.to_str().context("path")?;
    api_json(bin, env, &["ingest", "--customer", customer, path])
}

/// Every scope's name, for a key that may do everything.
pub fn every_scope() -> Vec<&'static str> {
    posture_domain::Scope::ALL
        .iter()
        .map(|s| s.as_str())
        .collect()
}

/// Issues a key with these scopes to `customer`; returns the secret.
pub fn issue_key(
    bin: &Path,
    env: &[(&str, &str)],
    customer: &str,
    name: &str,
    scopes: &[&str],
) -> anyhow::Result<String> {
    let mut args = vec!["keys", "issue", "--customer", customer, "--name", name];
    for scope in scopes {
        args.extend(["--scope", scope]);
    }
    Ok(api_json(bin, env, &args)?["key"]
        .as_str()
        .context("key")?
        .to_owned())
}

/// Child processes stopped (SIGTERM, then waited for) when dropped.
pub struct Guard(pub Vec<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        for child in &mut self.0 {
            // SIGTERM first, for a graceful stop.
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
        }
        for child in &mut self.0 {
            let _ = child.wait();
        }
    }
}

/// 32 random bytes (a `POSTURE_SECRET_KEY`).
pub fn rand_bytes() -> anyhow::Result<[u8; 32]> {
    let mut bytes = [0u8; 32];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut bytes)?;
    Ok(bytes)
}

/// Waits until something listens on `bind` (30 s at most).
pub fn wait_until_listening(bind: &str) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(bind).is_err() {
        if std::time::Instant::now() > deadline {
            bail!("nothing started listening on {bind} in 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(())
}

/// A P-256 key pair made by OpenSSL in `dir` (`client.key`, PKCS#8, and `client.pub`), as
/// docs/auth.md tells customers to make one: the paths of the private and the public key.
pub fn p256_key_pair(dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let (private, public) = (dir.join("client.key"), dir.join("client.pub"));
    crate::process::run(
        Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-out",
            ])
            .arg(&private),
    )?;
    crate::process::run(
        Command::new("openssl")
            .args(["pkey", "-pubout", "-in"])
            .arg(&private)
            .arg("-out")
            .arg(&public),
    )?;
    Ok((private, public))
}
