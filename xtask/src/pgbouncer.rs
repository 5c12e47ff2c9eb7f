//! PgBouncer for the tests that run posture through it in transaction mode
//! (`TEST_PGBOUNCER`). Transaction pooling with prepared statements needs PgBouncer 1.21
//! or later (`max_prepared_statements`); Debian 12 ships 1.18, so when no recent enough
//! `pgbouncer` is on PATH, 1.24.1 is built from Debian's source tarball (checked against its
//! SHA-256) into `target/pgbouncer`, once. Building needs a C compiler, make, pkg-config
//! and the headers of libevent, OpenSSL and c-ares (Debian: `apt-get install -y
//! libevent-dev libssl-dev libc-ares-dev pkg-config make`).

use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, bail};
use sha2::{Digest as _, Sha256};

use crate::{
    files::project_root,
    process::{eprintln_status, on_path, output, run},
};

const VERSION: &str = "1.24.1";
const SOURCE: &str =
    "http://deb.debian.org/debian/pool/main/p/pgbouncer/pgbouncer_1.24.1.orig.tar.gz";
const SOURCE_SHA256: &str = "da72a3aba13072876d055a3e58dd4aba4a5de4ed6148e73033185245598fd3e0";

/// Whether `binary` is PgBouncer 1.21 or later.
fn recent_enough(binary: &std::path::Path) -> bool {
    let Ok(text) = output(Command::new(binary).arg("--version")) else {
        return false;
    };
    let version = text.split_whitespace().nth(1).unwrap_or("");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (1, 21)
}

/// A PgBouncer of 1.21 or later: on PATH, or built into `target/pgbouncer`.
pub fn ensure() -> anyhow::Result<PathBuf> {
    if let Some(found) = on_path("pgbouncer").filter(|p| recent_enough(p)) {
        return Ok(found);
    }
    let prefix = project_root().join("target").join("pgbouncer");
    let binary = prefix.join("bin").join("pgbouncer");
    if binary.is_file() && recent_enough(&binary) {
        return Ok(binary);
    }
    eprintln_status(&format!(
        "building PgBouncer {VERSION} into {}",
        prefix.display()
    ));
    let build = prefix.join("build");
    std::fs::create_dir_all(&build)?;
    let tarball = build.join("pgbouncer.tar.gz");
    run(Command::new("curl")
        .args(["-sSfL", "--retry", "3", "-o"])
        .arg(&tarball)
        .arg(SOURCE))
    .context("downloading PgBouncer's source")?;
    let digest = Sha256::digest(std::fs::read(&tarball)?);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    if hex != SOURCE_SHA256 {
        bail!("{SOURCE}: SHA-256 {hex}, expected {SOURCE_SHA256}");
    }
    run(Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&build))?;
    let source = build.join(format!("pgbouncer-{VERSION}"));
    run(Command::new("./configure")
        .current_dir(&source)
        .arg(format!("--prefix={}", prefix.display()))
        .arg("--without-systemd")
        .stdout(std::process::Stdio::null()))
    .context(
        "configuring PgBouncer failed: install libevent-dev libssl-dev libc-ares-dev \
         pkg-config make",
    )?;
    run(Command::new("make")
        .current_dir(&source)
        .args(["-j2", "install"])
        .stdout(std::process::Stdio::null()))?;
    if !recent_enough(&binary) {
        bail!("{} does not run after the build", binary.display());
    }
    Ok(binary)
}
