//! `cargo xtask vendor-docs`: refreshes the API reference page's script vendored into
//! `posture-api` (docs/api.md, "The API reference page").
//!
//! Installs the pinned `@scalar/api-reference` from `xtask/docs-page/package-lock.json`
//! (npm), and writes its self-contained browser bundle, gzipped (level 9, no timestamp: the
//! same input gives the same bytes), to `crates/http/assets/docs/`, with `scalar.version`
//! (the package's version, which names the served file) and `scalar.sha256` (of the
//! uncompressed bundle; a unit test of posture-http checks the embedded file against it).
//! The bundle is committed, so building posture needs neither npm nor a network. It also
//! writes `xtask/docs-page/notices.md`, the license texts of the installed packages (the
//! bundle holds these), which `cargo xtask notices` puts into THIRD-PARTY-NOTICES.md.

use std::{
    fmt::Write as _,
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};
use sha2::{Digest as _, Sha256};

use crate::{
    files::project_root,
    process::{eprintln_status, npm_ci},
};

const PACKAGE: &str = "@scalar/api-reference";

pub fn run() -> anyhow::Result<()> {
    let root = project_root();
    let dir = root.join("target").join("docs-page");
    npm_ci(&root.join("xtask").join("docs-page"), &dir, PACKAGE)?;
    let package_dir = dir.join("node_modules").join(PACKAGE);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(package_dir.join("package.json"))?)?;
    let version = manifest["version"].as_str().context("package version")?;
    if manifest["license"] != "MIT" {
        bail!("{PACKAGE} {version} is no longer MIT-licensed: review before vendoring");
    }
    let bundle = std::fs::read(package_dir.join("dist/browser/standalone.js"))
        .context("the package has no dist/browser/standalone.js")?;
    let mut encoder = flate2::GzBuilder::new().write(Vec::new(), flate2::Compression::best());
    encoder.write_all(&bundle)?;
    let gzipped = encoder.finish()?;
    let assets = root.join("crates/http/assets/docs");
    std::fs::create_dir_all(&assets)?;
    std::fs::write(assets.join("scalar-api-reference.js.gz"), &gzipped)?;
    std::fs::write(assets.join("scalar.version"), format!("{version}\n"))?;
    let digest: String = Sha256::digest(&bundle)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(assets.join("scalar.sha256"), format!("{digest}\n"))?;
    let notices = npm_notices(&dir)?;
    std::fs::write(root.join("xtask/docs-page/notices.md"), notices)?;
    eprintln_status(&format!(
        "vendored {PACKAGE} {version}: {} bytes, {} gzipped",
        bundle.len(),
        gzipped.len()
    ));
    Ok(())
}

/// The license file of an installed package, if it ships one.
fn license_text(package: &Path) -> Option<String> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(package)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("")
                .to_ascii_uppercase();
            p.is_file()
                && (name.starts_with("LICENSE") || name.starts_with("LICENCE") || name == "COPYING")
        })
        .collect();
    names.sort();
    let text = std::fs::read_to_string(names.first()?).ok()?;
    Some(text.trim_end().to_owned())
}

/// The notices of every installed package of the lock file (not the dev ones), in its order:
/// name, version, license and the package's own license text.
fn npm_notices(dir: &Path) -> anyhow::Result<String> {
    let lock: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("package-lock.json"))?)?;
    let packages = lock["packages"]
        .as_object()
        .context("package-lock.json has no packages")?;
    let mut out = String::from(
        "## The API reference page's script\n\nThe vendored bundle of `@scalar/api-reference` \
         and the npm packages installed with it (`xtask/docs-page/package-lock.json`; the \
         bundle holds these or fewer), each with its license and its own license text.\n",
    );
    for (path, entry) in packages {
        let Some(name) = path.rsplit_once("node_modules/").map(|(_, n)| n) else {
            continue;
        };
        if entry["dev"].as_bool() == Some(true) {
            continue;
        }
        let version = entry["version"].as_str().unwrap_or("?");
        let license = entry["license"].as_str().unwrap_or("not stated");
        let _ = write!(out, "\n### {name} {version} ({license})\n\n");
        match license_text(&dir.join(path)) {
            // Four backticks: a license text holding a fence of three cannot close this one.
            Some(text) => {
                let _ = write!(out, "````text\n{text}\n````\n");
            }
            None => {
                let _ = writeln!(
                    out,
                    "The package ships no license file; its package.json states {license}."
                );
            }
        }
    }
    Ok(out)
}
