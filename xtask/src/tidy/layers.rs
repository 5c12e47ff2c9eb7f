//! Files in layers: within a crate, a module names nothing declared in its ancestors' own
//! files (`lib.rs`, a `mod.rs`), only what their other children declare. A parent then
//! composes its children and is read last; a child can be read, tested and moved without
//! it. `use crate::ConsoleState` in a handler, where `ConsoleState` is declared in
//! `lib.rs`, runs upward; the same struct in `state.rs` is a sibling.
//!
//! Paths are resolved as [`super::cycles`] resolves them (through re-exports to where a
//! name is declared); test modules do not count — `tests`, and any module declared under
//! `#[cfg(test)]` — (`use super::*` is how a test reads its module). The crates that still have upward imports are listed with how many
//! (module → ancestor pairs): a crate may have fewer, never more, and the table is lowered
//! as they go (a count below the ceiling fails too, naming the new one).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use super::{
    clock::shipped,
    cycles::{ModPath, expand, module_of, modules, reexports, referenced_paths, resolve},
};
use crate::files::project_root;

/// Each source root that still imports upward, with its number of module → ancestor pairs
/// (measured when the rule came; the target is none).
const CEILINGS: &[(&str, usize)] = &[
    ("crates/domain/src", 1),
    ("crates/http/src", 3),
    ("crates/store-postgres/src", 5),
    ("crates/test-support/src", 1),
    ("xtask/src", 1),
    ("xtask/lab/src", 5),
];

/// The upward imports of one source root: `module -> ancestor (path)`, one per pair.
pub(super) fn upward(src: &Path, files: &[PathBuf]) -> Vec<String> {
    let modules = modules(src, files);
    let texts: Vec<(ModPath, String)> = files
        .iter()
        .filter_map(|file| Some((module_of(src, file)?, std::fs::read_to_string(file).ok()?)))
        .collect();
    let reexported = texts
        .iter()
        .map(|(module, text)| (module.clone(), reexports(text)))
        .collect();
    let outside: BTreeMap<ModPath, BTreeSet<String>> = texts
        .iter()
        .map(|(module, text)| {
            (
                module.clone(),
                imported_from_outside(module, text, &modules),
            )
        })
        .collect();
    let tested = test_modules(&texts);
    let mut pairs = BTreeMap::new();
    for (from, text) in &texts {
        // A test module reads its module as a test does.
        if from.last().is_some_and(|m| m == "tests") || tested.iter().any(|t| from.starts_with(t)) {
            continue;
        }
        for path in referenced_paths(shipped(text)) {
            // `crate::` opening a use tree: its paths are listed on their own.
            if path.ends_with("::") {
                continue;
            }
            let Some(to) = resolve(&path, from, &modules, &reexported) else {
                continue;
            };
            // A name the ancestor imports from another crate (`use xtask::files;` in a
            // binary's root) is that crate's, not the ancestor's.
            let named = name_after(&path, from, &to);
            if named.is_some_and(|n| outside.get(&to).is_some_and(|names| names.contains(n))) {
                continue;
            }
            if to.len() < from.len() && from.starts_with(&to) {
                pairs.entry((shown(from), shown(&to))).or_insert(path);
            }
        }
    }
    pairs
        .into_iter()
        .map(|((from, to), path)| format!("{from} -> {to} ({path})"))
        .collect()
}

/// The modules declared under `#[cfg(test)]` (`#[cfg(test)] mod hostile;`): compiled for
/// tests only.
fn test_modules(texts: &[(ModPath, String)]) -> Vec<ModPath> {
    let mut found = Vec::new();
    for (module, text) in texts {
        for (at, _) in text.match_indices("#[cfg(test)]") {
            let rest = text[at + "#[cfg(test)]".len()..].trim_start();
            let Some(rest) = rest.strip_prefix("mod ") else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.push([module.clone(), vec![name]].concat());
            }
        }
    }
    found
}

/// A module as the breaches name it.
fn shown(module: &ModPath) -> String {
    match module.is_empty() {
        true => "(root)".to_owned(),
        false => module.join("::"),
    }
}

/// The segment of `path` (written in `from`) that names an item of `to`, the module it
/// resolved to: the one after the `crate`/`super` prefix and the modules walked.
fn name_after<'a>(path: &'a str, from: &ModPath, to: &ModPath) -> Option<&'a str> {
    let segments: Vec<&str> = path.split("::").collect();
    let (base, skipped) = match *segments.first()? {
        "crate" => (0, 1),
        "super" => {
            let supers = segments.iter().take_while(|s| **s == "super").count();
            (from.len().checked_sub(supers)?, supers)
        }
        _ => return None,
    };
    segments.get(skipped + to.len().checked_sub(base)?).copied()
}

/// The names `text` (module `module`) imports with `use` from other crates (not `crate`,
/// `self`, `super` or one of its child modules).
fn imported_from_outside(
    module: &ModPath,
    text: &str,
    modules: &BTreeSet<ModPath>,
) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in text.match_indices("use ") {
        let before_ok = at == 0 || !text.as_bytes()[at - 1].is_ascii_alphanumeric();
        let tail = &text[at + 4..];
        let Some(end) = tail.find(';').filter(|_| before_ok) else {
            continue;
        };
        let tree: String = tail[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        for path in expand(&tree) {
            let first = path.split("::").next().unwrap_or_default();
            let child = [module.clone(), vec![first.to_owned()]].concat();
            if ["crate", "self", "super"].contains(&first) || modules.contains(&child) {
                continue;
            }
            if let Some(name) = path.rsplit("::").next() {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// Breaches: a source root with more upward pairs than its ceiling, or fewer.
pub(super) fn upward_imports(files: &[PathBuf]) -> Vec<String> {
    let root = project_root();
    let mut found = Vec::new();
    for src in source_roots(files) {
        let mine: Vec<PathBuf> = files
            .iter()
            .filter(|f| f.starts_with(&src))
            .cloned()
            .collect();
        let shown = src
            .strip_prefix(&root)
            .unwrap_or(&src)
            .display()
            .to_string();
        let pairs = upward(&src, &mine);
        let ceiling = CEILINGS
            .iter()
            .find(|(s, _)| *s == shown)
            .map_or(0, |(_, n)| *n);
        if pairs.len() > ceiling {
            found.push(format!(
                "{shown}: {} modules import from their ancestors' own files (at most {ceiling}; \
                 move what they import into a sibling module): {}",
                pairs.len(),
                pairs.join("; ")
            ));
        } else if pairs.len() < ceiling {
            found.push(format!(
                "{shown}: {} upward imports now, fewer than its ceiling {ceiling}: lower it in \
                 xtask/src/tidy/layers.rs",
                pairs.len()
            ));
        }
    }
    found
}

/// The `src/` directories of the packages (a crate's `src/`, xtask's, the lab's): test
/// binaries and benches are not layered modules.
fn source_roots(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = files
        .iter()
        .filter(|f| {
            f.file_name()
                .is_some_and(|n| n == "lib.rs" || n == "main.rs")
        })
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .filter(|dir| dir.ends_with("src"))
        .collect();
    roots.sort();
    roots.dedup();
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_of_the_crate_root_named_by_a_module_is_upward_and_a_sibling_s_is_not() {
        let dir = std::env::temp_dir().join(format!("tidy-layers-{}", std::process::id()));
        let src = dir.join("src");
        std::fs::create_dir_all(&src).unwrap();
        let write = |name: &str, text: &str| {
            std::fs::write(src.join(name), text).unwrap();
            src.join(name)
        };
        let files = vec![
            write(
                "lib.rs",
                "//! x\nmod a;\nmod b;\n#[cfg(test)]\nmod checks;\nmod state;\npub struct Root;\n\
                 pub use state::State;\n",
            ),
            // Compiled for tests only: it reads the root as a test does.
            write("checks.rs", "//! x\nuse crate::Root;\n"),
            write("a.rs", "//! x\nuse crate::Root;\n"),
            // Through the root's re-export, to the sibling that declares it: not upward.
            write(
                "b.rs",
                "//! x\nuse crate::State;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
            ),
            write("state.rs", "//! x\npub struct State;\n"),
        ];
        assert_eq!(
            upward(&src, &files),
            vec!["a -> (root) (crate::Root)".to_owned()]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
