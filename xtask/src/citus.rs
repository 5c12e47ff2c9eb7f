//! Citus for the tasks that run posture on a distributed database (`test --citus`, `chaos
//! --citus`, `bench --citus`). Citus is a separate server program, licensed AGPL-3.0: it is
//! installed as an extension of the machine's PostgreSQL and posture talks to it over
//! PostgreSQL's protocol; nothing of it is linked into, or shipped with, posture.
//!
//! When the extension is missing, it is built from the source tarball that `CITUS_SOURCE`
//! names (a `git archive` of a Citus 13.2 tag) against the installed PostgreSQL's server
//! headers, in `target/citus-build`, and installed into PostgreSQL's directories (as root,
//! or through `sudo -n`): about 70 s on 2 cores. Without `CITUS_SOURCE` the task stops and
//! says how to install Citus's own packages. What building takes comes from apt
//! (`setup::CITUS_BUILD`).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::{
    files::project_root,
    process::{eprintln_status, on_path, output, run},
};

/// The version of Citus posture is tested with.
pub const TESTED: &str = "13.2";

/// Makes sure the Citus extension is installed for the machine's PostgreSQL.
pub fn ensure() -> anyhow::Result<()> {
    if posture_test_servers::citus::installed() {
        return Ok(());
    }
    let Some(source) = std::env::var_os("CITUS_SOURCE") else {
        bail!(
            "the Citus extension is not installed for this machine's PostgreSQL. Install \
             Citus {TESTED} from Citus's package repository (its installation guide names \
             the package for your PostgreSQL, e.g. postgresql-15-citus-13.2), or set \
             CITUS_SOURCE to a source tarball of Citus {TESTED} (`git archive` of its tag) \
             and run the task again: it is then built here"
        );
    };
    build(Path::new(&source))
}

/// The `pg_config` of the PostgreSQL whose server the tasks start.
fn pg_config() -> anyhow::Result<PathBuf> {
    let bin = posture_test_servers::servers::postgres_bin()
        .context("PostgreSQL's server binaries were not found")?;
    let pg_config = bin.join("pg_config");
    if pg_config.is_file() {
        return Ok(pg_config);
    }
    on_path("pg_config").context(
        "pg_config was not found: install PostgreSQL's server headers at the installed \
         server's exact version (cargo xtask setup citus does, and never upgrades the server; \
         Debian/Ubuntu: apt-get install -y postgresql-server-dev-<major>=<the server's version>)",
    )
}

fn build(source: &Path) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let source = std::fs::canonicalize(source)
        .with_context(|| format!("CITUS_SOURCE={}", source.display()))?;
    eprintln_status(&format!(
        "building Citus from {} (about 70 s on 2 cores)",
        source.display()
    ));
    let work = project_root().join("target").join("citus-build");
    if work.exists() {
        std::fs::remove_dir_all(&work)?;
    }
    std::fs::create_dir_all(&work)?;
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&source)
        .arg("-C")
        .arg(&work))?;
    let tree = std::fs::read_dir(&work)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.join("configure").is_file())
        .context("the tarball holds no Citus source tree (no configure script)")?;
    let pg_config = pg_config()?;
    adapt_to_headers(&tree, &pg_config)?;
    run(Command::new("./configure")
        .current_dir(&tree)
        .env("PG_CONFIG", &pg_config)
        .stdout(std::process::Stdio::null()))
    .context("configuring Citus (see config.log in target/citus-build)")?;
    run(Command::new("make")
        .args(["-j2", "-s"])
        .current_dir(&tree)
        .stdout(std::process::Stdio::null()))
    .context("building Citus")?;
    let mut install = match crate::setup::installer() {
        Some(prefix) if !prefix.is_empty() => {
            let mut command = Command::new(prefix[0]);
            command.args(&prefix[1..]).arg("make");
            command
        }
        Some(_) => Command::new("make"),
        None => bail!(
            "Citus is built in {} but installing it into PostgreSQL's directories needs \
             root: run `sudo make -C {} install`",
            tree.display(),
            tree.display()
        ),
    };
    run(install
        .args(["-s", "install"])
        .current_dir(&tree)
        .stdout(std::process::Stdio::null()))
    .context("installing Citus")?;
    if !posture_test_servers::citus::installed() {
        bail!("Citus was built and installed, but PostgreSQL does not see it");
    }
    eprintln_status(&format!(
        "Citus installed in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// Debian's PostgreSQL 15.20 declares `have_createdb_privilege()` in its server headers,
/// which Citus 13.2's compatibility header also defines for older minor releases (the build
/// then fails: "static declaration ... follows non-static declaration"). When the headers
/// declare it, Citus's own copy is renamed.
fn adapt_to_headers(tree: &Path, pg_config: &Path) -> anyhow::Result<()> {
    let include = output(Command::new(pg_config).arg("--includedir-server"))?;
    let declared = std::fs::read_to_string(
        Path::new(include.trim())
            .join("commands")
            .join("dbcommands.h"),
    )
    .unwrap_or_default()
    .contains("have_createdb_privilege");
    let compat = tree.join("src/include/pg_version_compat.h");
    let text = std::fs::read_to_string(&compat).unwrap_or_default();
    let definition = "static inline bool\nhave_createdb_privilege(void)";
    if declared && text.contains(definition) && !text.contains("citus_have_createdb_privilege") {
        eprintln_status(
            "the server headers declare have_createdb_privilege(): Citus's copy is renamed",
        );
        let renamed = text.replacen(
            definition,
            &format!("#define have_createdb_privilege citus_have_createdb_privilege\n{definition}"),
            1,
        );
        std::fs::write(&compat, renamed)?;
    }
    Ok(())
}
