//! Files of the repository: where it is, scratch space under `target/`, and generated
//! files that are written or checked (`ensure_file_contents`).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use crate::process::eprintln_status;

/// The repository's root directory.
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// `target/xtask/<name>`, created.
pub fn scratch_dir(name: &str) -> anyhow::Result<PathBuf> {
    let dir = project_root().join("target").join("xtask").join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Writes a generated file, or in `check` mode fails if it differs from what is committed.
pub fn ensure_file_contents(
    path: &Path,
    contents: &str,
    check: bool,
    regenerate: &str,
) -> anyhow::Result<()> {
    let current = std::fs::read_to_string(path).unwrap_or_default();
    if current == contents {
        return Ok(());
    }
    let shown = path
        .strip_prefix(project_root())
        .unwrap_or(path)
        .display()
        .to_string();
    if check {
        bail!("{shown} is out of date: run `{regenerate}` and commit the result");
    }
    std::fs::write(path, contents).with_context(|| format!("writing {shown}"))?;
    eprintln_status(&format!("updated {shown}"));
    Ok(())
}
