//! `cargo xtask vendor-docs`: refreshes the API reference page's script vendored into
//! `posture-api` (docs/api.md, "The API reference page").
//!
//! Installs the pinned `@scalar/api-reference` from `xtask/docs-page/package-lock.json`
//! (npm), and writes its self-contained browser bundle, gzipped (level 9, no timestamp: the
//! same input gives the same bytes), to `crates/http/assets/docs/`, with `scalar.version`
//! (the package's version, which names the served file) and `scalar.sha256` (of the
//! uncompressed bundle; a unit test of posture-http checks the embedded file against it).
//! The bundle is committed, so building posture needs neither npm nor a network.

use std::io::Write as _;

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
    eprintln_status(&format!(
        "vendored {PACKAGE} {version}: {} bytes, {} gzipped",
        bundle.len(),
        gzipped.len()
    ));
    Ok(())
}
