//! Processes the tasks run: commands and their output, and status lines for the person
//! running the task.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

/// A line of progress for the person running the task (stderr).
pub fn eprintln_status(message: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "xtask: {message}");
}

/// Cargo, for a task to run (`$CARGO`, which cargo sets for what it runs, else `cargo` on the
/// path), without the variables that `cargo run` set for this program.
///
/// A task runs as `cargo run` runs it, so it inherits `CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`
/// and the rest, which name xtask (or the lab), not what the nested cargo builds. Some build
/// scripts declare them as inputs (ring's reads `CARGO_MANIFEST_DIR` from its environment):
/// a nested cargo that inherits them sees a changed input, rebuilds ring and everything that
/// links it, and the next build from a shell (or another task) rebuilds them back — once per
/// task in CI, a minute or two each. Without them, every cargo sees the environment a shell
/// gives it.
pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_by_cargo_run) {
            command.env_remove(name);
        }
    }
    command
}

/// Whether `name` is one of the variables `cargo run` sets for the program it runs (those
/// that describe its package), as opposed to the user's configuration of cargo.
fn set_by_cargo_run(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || matches!(
            name,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_MANIFEST_LINKS"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_RUSTC_CURRENT_DIR"
                | "OUT_DIR"
        )
}

/// Runs a command, failing with its command line if it fails.
pub fn run(command: &mut Command) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("running {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed with {status}");
    }
    Ok(())
}

/// Runs a command and returns its stdout.
pub fn output(command: &mut Command) -> anyhow::Result<String> {
    let out = command
        .output()
        .with_context(|| format!("running {command:?}"))?;
    if !out.status.success() {
        bail!(
            "{command:?} failed with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// The first line `psql -At` prints for `sql` (empty when it prints nothing).
pub fn psql_value(url: &str, sql: &str) -> anyhow::Result<String> {
    let text = output(Command::new("psql").arg(url).args(["-Atc", sql]))?;
    Ok(text.lines().next().map(str::trim).unwrap_or("").to_owned())
}

/// Whether an executable is on PATH.
pub fn on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// A Python virtual environment at `venv` holding `packages` (pinned), created when missing
/// and installed again when the pins change.
pub fn python_venv(venv: &Path, packages: &[&str]) -> anyhow::Result<()> {
    let pinned = venv.join(format!("{}.installed", packages.join("+")));
    if !pinned.exists() {
        eprintln_status(&format!(
            "installing {} into {}",
            packages.join(" "),
            venv.display()
        ));
        run(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
        run(Command::new(venv.join("bin").join("pip"))
            .args(["install", "--quiet"])
            .args(packages))?;
        std::fs::write(&pinned, "")?;
    }
    Ok(())
}

/// Installs the npm packages of `source` (its `package.json` and committed
/// `package-lock.json`) into `dir` with `npm ci`, when the lock file changed since the last
/// install or nothing is installed yet.
pub fn npm_ci(source: &Path, dir: &Path, what: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let lock = std::fs::read(source.join("package-lock.json"))?;
    let installed = std::fs::read(dir.join("package-lock.json")).unwrap_or_default();
    if lock != installed || !dir.join("node_modules").exists() {
        eprintln_status(&format!("installing {what} (npm ci)"));
        std::fs::copy(source.join("package.json"), dir.join("package.json"))?;
        std::fs::copy(
            source.join("package-lock.json"),
            dir.join("package-lock.json"),
        )?;
        run(Command::new("npm")
            .args(["ci", "--silent", "--no-audit", "--no-fund"])
            .current_dir(dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_cargo_run_set_is_dropped_and_the_users_configuration_kept() {
        for dropped in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
        ] {
            assert!(set_by_cargo_run(dropped), "{dropped}");
        }
        for kept in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "PATH",
        ] {
            assert!(!set_by_cargo_run(kept), "{kept}");
        }
    }

    #[test]
    fn a_nested_cargo_does_not_inherit_this_packages_manifest_dir() {
        // Tests run under cargo, which sets it for them as `cargo run` does for a task.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let command = cargo();
        let removed: Vec<_> = command
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| name.to_owned())
            .collect();
        assert!(
            removed.iter().any(|name| name == "CARGO_MANIFEST_DIR"),
            "{removed:?}"
        );
        assert!(
            removed.iter().any(|name| name == "CARGO_PKG_NAME"),
            "{removed:?}"
        );
    }
}
