//! The migrated template every test database is cloned from, named by what it is made of.

use std::{fmt::Write as _, path::Path};

use posture_store_postgres::migrations;
use sha2::{Digest as _, Sha256};

/// The template's name: a hash of every migration, so a changed migration gets a fresh one.
pub(crate) fn name() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut entries: Vec<_> = walk(&dir);
    entries.sort();
    let mut hash = Sha256::new();
    for path in entries {
        hash.update(
            path.strip_prefix(&dir)
                .unwrap()
                .to_string_lossy()
                .as_bytes(),
        );
        hash.update(std::fs::read(&path).unwrap());
    }
    hash.update(migrations::RUNTIME_GRANTS.as_bytes());
    let digest = hash.finalize();
    let mut name = String::from("posture_tpl_");
    for byte in &digest[..6] {
        write!(name, "{byte:02x}").unwrap();
    }
    name
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
