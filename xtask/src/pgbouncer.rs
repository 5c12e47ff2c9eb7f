//! PgBouncer for the tests that run posture through it in transaction mode
//! (`TEST_PGBOUNCER`). Transaction pooling with prepared statements needs PgBouncer 1.21
//! or later (`max_prepared_statements`); Debian 12 ships 1.18, so when no recent enough
//! `pgbouncer` is on PATH, 1.24.1 is built from Debian's source tarball (checked against its
//! SHA-256) into `target/pgbouncer`, once. The tarball comes from the archives this
//! machine's apt is configured with (`apt-get indextargets`; their pool holds the sources of
//! every release, Ubuntu's too), through apt's proxy if it has one: no host is named here,
//! since machines in companies and in CI often reach packages only through their own
//! mirror. Building needs what `setup::PGBOUNCER` installs: a C compiler, make, pkg-config
//! and the headers of libevent, OpenSSL and c-ares.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};
use sha2::{Digest as _, Sha256};

use crate::{
    files::project_root,
    process::{eprintln_status, on_path, output, run},
};

const VERSION: &str = "1.24.1";
/// Where the tarball lies in a Debian or Ubuntu archive (main, or Ubuntu's universe).
const POOL_PATHS: [&str; 2] = [
    "pool/main/p/pgbouncer/pgbouncer_1.24.1.orig.tar.gz",
    "pool/universe/p/pgbouncer/pgbouncer_1.24.1.orig.tar.gz",
];
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

/// A PgBouncer of 1.21 or later already here: on PATH, or built into `target/pgbouncer`.
pub fn at_hand() -> Option<PathBuf> {
    on_path("pgbouncer")
        .filter(|p| recent_enough(p))
        .or_else(|| Some(built()).filter(|b| b.is_file() && recent_enough(b)))
}

fn built() -> PathBuf {
    project_root().join("target/pgbouncer/bin/pgbouncer")
}

/// The archives apt fetches from on this machine (`http://…/debian/`), as apt itself reads
/// its sources (one-line and deb822 files alike).
fn apt_archives() -> Vec<String> {
    let listed = output(Command::new("apt-get").args(["indextargets", "--format", "$(REPO_URI)"]))
        .unwrap_or_default();
    let mut archives: Vec<String> = Vec::new();
    for uri in listed
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("http"))
    {
        let uri = if uri.ends_with('/') {
            uri.to_owned()
        } else {
            format!("{uri}/")
        };
        if !archives.contains(&uri) {
            archives.push(uri);
        }
    }
    archives
}

/// Apt's proxy for `scheme` (`Acquire::http::Proxy`), if one is configured.
fn apt_proxy(scheme: &str) -> Option<String> {
    let key = format!("Acquire::{scheme}::Proxy");
    let value = output(Command::new("apt-config").args(["shell", "P", &key])).ok()?;
    let value = value.trim().strip_prefix("P=")?.trim_matches('\'');
    (!value.is_empty() && value != "DIRECT").then(|| value.to_owned())
}

/// Downloads the source tarball from the first of apt's archives that has it and whose copy
/// matches the checksum.
fn download(tarball: &Path) -> anyhow::Result<()> {
    let archives = apt_archives();
    if archives.is_empty() {
        bail!(
            "no package archive is configured for apt here (apt-get indextargets lists none): \
             put pgbouncer 1.21 or later on PATH"
        );
    }
    let mut tried = Vec::new();
    for url in archives
        .iter()
        .flat_map(|archive| POOL_PATHS.map(|path| format!("{archive}{path}")))
    {
        let mut curl = Command::new("curl");
        curl.args(["-sSfL", "--retry", "2", "-o"])
            .arg(tarball)
            .arg(&url);
        for scheme in ["http", "https"] {
            if let Some(proxy) = apt_proxy(scheme) {
                curl.env(format!("{scheme}_proxy"), proxy);
            }
        }
        curl.stderr(std::process::Stdio::null());
        if !curl.status().is_ok_and(|s| s.success()) {
            tried.push(format!("{url}: not found"));
            continue;
        }
        let digest = Sha256::digest(std::fs::read(tarball)?);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        if hex == SOURCE_SHA256 {
            eprintln_status(&format!("downloaded {url} (SHA-256 checked)"));
            return Ok(());
        }
        tried.push(format!("{url}: SHA-256 {hex}, expected {SOURCE_SHA256}"));
    }
    bail!(
        "PgBouncer {VERSION}'s source is in none of apt's archives:\n  {}\nput pgbouncer 1.21 or \
         later on PATH instead",
        tried.join("\n  ")
    )
}

/// A PgBouncer of 1.21 or later: on PATH, or built into `target/pgbouncer`.
pub fn ensure() -> anyhow::Result<PathBuf> {
    if let Some(found) = at_hand() {
        return Ok(found);
    }
    let prefix = project_root().join("target").join("pgbouncer");
    let binary = built();
    eprintln_status(&format!(
        "building PgBouncer {VERSION} into {}",
        prefix.display()
    ));
    let build = prefix.join("build");
    std::fs::create_dir_all(&build)?;
    let tarball = build.join("pgbouncer.tar.gz");
    download(&tarball).context("downloading PgBouncer's source")?;
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
