//! What the repository tracks: the top-level layout the design card names, and no binary
//! archive or executable unless listed here with its reason. A stray file (another
//! project's fixture, a tool's cache, a built artefact) is found when it is committed, not
//! by a reader who wonders why it is there.

use std::{path::Path, process::Command};

use crate::files::project_root;

/// The top-level entries a tracked file may live in or be, and why each is there.
const LAYOUT: &[(&str, &str)] = &[
    ("crates/", "the workspace's crates"),
    ("xtask/", "contributor tasks"),
    ("migrations/", "the database's migrations"),
    ("deploy/", "deployment manifests and monitoring"),
    ("docs/", "documentation and the committed contract"),
    (".cargo/", "cargo's aliases (cargo xtask)"),
    (".ci/", "the CI entry point"),
    ("Cargo.toml", "the workspace"),
    ("Cargo.lock", "pinned dependencies"),
    ("rust-toolchain.toml", "the toolchain"),
    ("rustfmt.toml", "formatting"),
    ("clippy.toml", "lints"),
    ("about.toml", "cargo-about: the accepted licenses"),
    ("about.hbs", "cargo-about: the notices' template"),
    (".spectral.yaml", "the contract's lint rules"),
    (".gitignore", "what the tasks generate"),
    (".dockerignore", "what image builds leave out"),
    ("README.md", "the quick start"),
    ("ARCHITECTURE.md", "the codemap"),
    ("CHANGELOG.md", "what changed"),
    ("LICENSE", "the license Cargo.toml declares"),
    (
        "THIRD-PARTY-NOTICES.md",
        "the licenses of what ships inside the binaries",
    ),
];

/// Binary archives and executables that are tracked on purpose.
const BINARIES: &[(&str, &str)] = &[(
    "crates/http/assets/docs/scalar-api-reference.js.gz",
    "the API reference page's script, vendored so a build needs no npm (cargo xtask \
     vendor-docs; MIT, in THIRD-PARTY-NOTICES.md)",
)];

/// Names that mark an archive or a built artefact.
const ARCHIVE_ENDINGS: &[&str] = &[
    ".whl", ".egg", ".tar", ".tgz", ".gz", ".zip", ".xz", ".bz2", ".zst", ".7z", ".jar", ".deb",
    ".rpm", ".exe", ".dll", ".so", ".dylib", ".a", ".o", ".rlib",
];

/// The opening bytes of archives and executables: ELF, PE, Mach-O, gzip, zip, xz, zstd,
/// bzip2.
const MAGIC: &[&[u8]] = &[
    b"\x7fELF",
    b"MZ",
    b"\xcf\xfa\xed\xfe",
    b"\x1f\x8b",
    b"PK\x03\x04",
    b"\xfd7zXZ",
    b"\x28\xb5\x2f\xfd",
    b"BZh",
];

/// The files git tracks (none outside a git checkout: a source tarball has no strays).
pub(super) fn tracked() -> Vec<String> {
    Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(project_root())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| {
            out.stdout
                .split(|b| *b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `path`'s name or first bytes say it is an archive or an executable.
fn binary(root: &Path, path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    if ARCHIVE_ENDINGS.iter().any(|e| lower.ends_with(e)) {
        return true;
    }
    let mut head = [0u8; 8];
    let read = std::fs::File::open(root.join(path))
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    MAGIC.iter().any(|m| head[..read].starts_with(m))
}

/// Tracked files (relative to `root`) outside the layout, and unlisted archives or
/// executables.
pub fn strays(root: &Path, files: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for file in files {
        let placed = LAYOUT.iter().any(|(entry, _)| {
            if entry.ends_with('/') {
                file.starts_with(entry)
            } else {
                file == entry
            }
        });
        if !placed {
            found.push(format!(
                "{file}: outside the repository's layout (tidy/tree.rs LAYOUT lists what \
                 belongs at the top, each with its reason)"
            ));
        }
        if binary(root, file) && !BINARIES.iter().any(|(listed, _)| listed == file) {
            found.push(format!(
                "{file}: a binary archive or executable; generate it under target/, or list \
                 it in tidy/tree.rs BINARIES with the reason it is committed"
            ));
        }
    }
    found
}

/// The rule over what git tracks now.
pub fn tree() -> Vec<String> {
    strays(&project_root(), &tracked())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strays_are_found_by_place_and_by_kind() {
        let found = strays(
            &project_root(),
            &[
                "pgbouncer-0.2.0-py3-none-any.whl".to_owned(),
                ".schemathesis/default/cache/crashes/manifest.json".to_owned(),
                "docs/tool.tar.gz".to_owned(),
                "crates/http/assets/docs/scalar-api-reference.js.gz".to_owned(),
                "crates/api/src/main.rs".to_owned(),
                "README.md".to_owned(),
            ],
        );
        assert_eq!(found.len(), 4, "{found:#?}");
        assert!(found[0].starts_with("pgbouncer-0.2.0-py3-none-any.whl: outside"));
        assert!(found[1].starts_with("pgbouncer-0.2.0-py3-none-any.whl: a binary"));
        assert!(found[2].starts_with(".schemathesis/"));
        assert!(found[3].starts_with("docs/tool.tar.gz: a binary"));
    }

    #[test]
    fn an_executable_is_found_by_its_first_bytes_whatever_its_name() {
        let dir = std::env::temp_dir().join(format!("tidy-tree-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("xtask")).unwrap();
        std::fs::write(dir.join("xtask/tool"), b"\x7fELF\x02\x01\x01\x00").unwrap();
        std::fs::write(dir.join("xtask/notes"), b"plain text").unwrap();
        let found = strays(&dir, &["xtask/tool".to_owned(), "xtask/notes".to_owned()]);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].starts_with("xtask/tool: a binary archive or executable"));
    }

    #[test]
    fn every_listed_binary_is_tracked() {
        let files = tracked();
        for (listed, _) in BINARIES {
            assert!(
                files.iter().any(|f| f == listed),
                "{listed} is listed but not tracked"
            );
        }
    }
}
