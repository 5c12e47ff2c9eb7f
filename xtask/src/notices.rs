//! `cargo xtask notices [--check]`: THIRD-PARTY-NOTICES.md, the licenses of what ships inside
//! posture's binaries. cargo-about (pinned, installed once per machine under Cargo's home) reads the
//! crates `posture-api` is built from (`posture-worker`'s are a subset, checked here), fails
//! on a license outside `about.toml`'s accepted list, and renders `about.hbs`; the npm
//! packages of the vendored API reference page follow (`xtask/docs-page/notices.md`, written
//! by `cargo xtask vendor-docs`). The customers' CLI ships apart from the service, with its
//! own notices: crates/cli/THIRD-PARTY-NOTICES.md, rendered the same way for `posture-cli`.
//! `--check` fails when a committed file differs.
//!
//! cargo-about runs offline: it reads the license files in the crates' sources and asks no
//! outside service (and no advisory database is consulted here: this machine cannot reach
//! one, see docs/security-testing.md).

use std::{collections::BTreeSet, path::PathBuf, process::Command};

use anyhow::{Context as _, bail};

use crate::{
    files::project_root,
    process::{eprintln_status, output, run as run_command},
};

const CARGO_ABOUT: &str = "0.9.3";
const NOTICES: &str = "THIRD-PARTY-NOTICES.md";
const CLI_NOTICES: &str = "crates/cli/THIRD-PARTY-NOTICES.md";

/// cargo-about of the pinned version, installed when missing into a directory of its own
/// version under Cargo's home (`$CARGO_HOME/posture-tools/cargo-about-<version>`): every
/// clone on the machine reuses it (a fresh clone's CI run does not build it again), and no
/// other cargo-about the user installed is replaced.
fn cargo_about() -> anyhow::Result<PathBuf> {
    let root = cargo_home()?
        .join("posture-tools")
        .join(format!("cargo-about-{CARGO_ABOUT}"));
    let binary = root.join("bin").join("cargo-about");
    let current = output(Command::new(&binary).arg("--version")).unwrap_or_default();
    if current.split_whitespace().nth(1) == Some(CARGO_ABOUT) {
        return Ok(binary);
    }
    eprintln_status(&format!(
        "installing cargo-about {CARGO_ABOUT} into {} (once per machine, about 2 minutes)",
        root.display()
    ));
    run_command(
        crate::process::cargo()
            .args(["install", "--locked", "--quiet", "--features", "cli"])
            .args(["--version", CARGO_ABOUT, "--root"])
            .arg(&root)
            .arg("cargo-about"),
    )
    .context("installing cargo-about")?;
    Ok(binary)
}

/// Cargo's home: `CARGO_HOME`, or `.cargo` in the user's home, as cargo itself finds it.
fn cargo_home() -> anyhow::Result<PathBuf> {
    if let Some(home) = std::env::var_os("CARGO_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|home| PathBuf::from(home).join(".cargo"))
        .context("neither CARGO_HOME nor HOME is set: cannot place cargo-about")
}

/// The crates (name and version) a package is built from: its normal dependencies, on Linux.
fn shipped(package: &str) -> anyhow::Result<BTreeSet<String>> {
    let text = output(
        crate::process::cargo()
            .current_dir(project_root())
            .args(["tree", "--locked", "-e", "normal", "--prefix", "none"])
            .args(["--target", "x86_64-unknown-linux-gnu", "-p", package]),
    )?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            Some(format!("{} {}", words.next()?, words.next()?))
        })
        .filter(|c| !c.starts_with("posture-"))
        .collect())
}

/// The notices as they should be.
fn render() -> anyhow::Result<String> {
    let root = project_root();
    let api = shipped("posture-api")?;
    let outside: Vec<String> = shipped("posture-worker")?
        .difference(&api)
        .cloned()
        .collect();
    if !outside.is_empty() {
        bail!(
            "posture-worker ships crates posture-api does not, which the notices (rendered for \
             posture-api) would miss: {}",
            outside.join(", ")
        );
    }
    let crates = crate_notices("crates/api/Cargo.toml")?;
    let npm = std::fs::read_to_string(root.join("xtask/docs-page/notices.md"))
        .context("xtask/docs-page/notices.md (cargo xtask vendor-docs writes it)")?;
    Ok(format!("{}\n\n{}", crates.trim_end(), npm.trim_end()) + "\n")
}

/// cargo-about's rendering of the crates one manifest's package is built from.
fn crate_notices(manifest: &str) -> anyhow::Result<String> {
    let about = cargo_about()?;
    output(
        Command::new(about)
            .current_dir(project_root())
            .args(["generate", "--locked", "--offline", "--fail"])
            .args(["-m", manifest, "about.hbs"]),
    )
    .context("cargo-about: a crate's license is not in about.toml's accepted list, or unknown")
}

pub fn run(check: bool) -> anyhow::Result<()> {
    let cli = crate_notices("crates/cli/Cargo.toml")?
        .trim_end()
        .to_owned()
        + "\n";
    for (name, expected) in [(NOTICES, render()?), (CLI_NOTICES, cli)] {
        let path = project_root().join(name);
        if check {
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            if committed != expected {
                bail!("{name} is stale: run `cargo xtask notices` and commit it");
            }
            eprintln_status(&format!("{name} is current"));
            continue;
        }
        std::fs::write(&path, expected)?;
        eprintln_status(&format!("wrote {name}"));
    }
    Ok(())
}
