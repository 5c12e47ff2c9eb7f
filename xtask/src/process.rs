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
