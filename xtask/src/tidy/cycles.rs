//! No circles between modules: within each crate, the modules under one parent depend on
//! each other in one direction only.
//!
//! Every path a file names (`use crate::a::{b, c}`, `super::d`, `crate::e::f` in code) is
//! resolved to a module; the reference is an edge between the two children of their
//! common ancestor (a module using its own parent or child is not an edge: that is how
//! Rust nests). A name a module re-exports (`pub use error::ConsoleError;` in `lib.rs`) is
//! followed to where it is declared, so `crate::ConsoleError` is a reference to `error`: a
//! circle through a re-export is still a circle. A cycle among the children of one parent
//! is a breach: it means neither module can be understood, tested or moved without the
//! other.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// A module's path from its crate's root (`["routes", "findings"]`).
pub(super) type ModPath = Vec<String>;

/// The modules of one crate: their paths, from the files under `src/`.
pub(super) fn modules(src: &Path, files: &[PathBuf]) -> BTreeSet<ModPath> {
    files
        .iter()
        .filter_map(|file| module_of(src, file))
        .collect()
}

/// The module a file defines (`None` for files outside `src/`).
pub(super) fn module_of(src: &Path, file: &Path) -> Option<ModPath> {
    let relative = file.strip_prefix(src).ok()?;
    let mut parts: ModPath = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    Some(parts)
}

/// The paths a use-tree names: `a::{b, c::{d, e}}` gives `a::b`, `a::c::d`, `a::c::e`.
pub(super) fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![path.to_owned()];
    };
    let prefix = tree[..open].trim_end_matches("::").trim();
    let inner = tree[open + 1..].trim_end().trim_end_matches('}');
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .filter(|i| !i.trim().is_empty())
        .flat_map(expand)
        .map(|p| match p.as_str() {
            "self" => prefix.to_owned(),
            _ if prefix.is_empty() => p,
            _ => format!("{prefix}::{p}"),
        })
        .collect()
}

/// Every path of `text` that starts with `crate::` or `super::` (comments, doc links
/// included, do not count: they are not dependencies).
pub(super) fn referenced_paths(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let text = code.as_str();
    let mut paths = Vec::new();
    // `use` declarations (possibly over several lines, with nested braces).
    let mut rest = text;
    while let Some(at) = rest.find("use ") {
        let before_ok = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric();
        let tail = &rest[at + 4..];
        let Some(end) = tail.find(';') else { break };
        if before_ok {
            let tree: String = tail[..end].split_whitespace().collect::<Vec<_>>().join(" ");
            paths.extend(expand(&tree));
        }
        rest = &tail[end..];
    }
    // Paths written in code.
    for start in ["crate::", "super::"] {
        for (at, _) in text.match_indices(start) {
            let path: String = text[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            paths.push(path);
        }
    }
    paths
        .into_iter()
        .filter(|p| p.starts_with("crate::") || p.starts_with("super::"))
        .collect()
}

/// The names a module's text re-exports (`pub use`, `pub(crate) use`), each with the path
/// it stands for as written there (a path without `crate`/`super`/`self` is the module's own
/// child's: `pub use error::X` is `self::error::X`).
pub(super) fn reexports(text: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for opening in ["pub use ", "pub(crate) use "] {
        for (at, _) in text.match_indices(opening) {
            let tail = &text[at + opening.len()..];
            let Some(end) = tail.find(';') else { continue };
            let tree: String = tail[..end].split_whitespace().collect::<Vec<_>>().join(" ");
            for path in expand(&tree) {
                let Some(name) = path.rsplit("::").next().map(str::to_owned) else {
                    continue;
                };
                let rooted = ["crate::", "super::", "self::"]
                    .iter()
                    .any(|p| path.starts_with(p));
                let path = if rooted {
                    path
                } else {
                    format!("self::{path}")
                };
                names.insert(name, path);
            }
        }
    }
    names
}

/// Re-exports by module.
pub(super) type Reexports = BTreeMap<ModPath, BTreeMap<String, String>>;

/// The module `path` (as written in module `from`) names, as deep as modules exist, and
/// through re-exports to where the name is declared.
pub(super) fn resolve(
    path: &str,
    from: &ModPath,
    modules: &BTreeSet<ModPath>,
    reexported: &Reexports,
) -> Option<ModPath> {
    resolve_within(path, from, modules, reexported, 0)
}

fn resolve_within(
    path: &str,
    from: &ModPath,
    modules: &BTreeSet<ModPath>,
    reexported: &Reexports,
    depth: usize,
) -> Option<ModPath> {
    let mut segments = path.split("::").filter(|s| !s.is_empty());
    let mut base: ModPath = match segments.next()? {
        "crate" => Vec::new(),
        "self" => from.clone(),
        "super" => {
            let mut base = from.clone();
            base.pop()?;
            base
        }
        _ => return None,
    };
    for segment in segments {
        if segment == "super" {
            base.pop()?;
            continue;
        }
        let mut deeper = base.clone();
        deeper.push(segment.to_owned());
        if modules.contains(&deeper) {
            base = deeper;
            continue;
        }
        // Not a module: an item of `base`, maybe one it re-exports from elsewhere.
        let target = reexported.get(&base).and_then(|names| names.get(segment));
        if let Some(target) = target.filter(|_| depth < 8) {
            let found = resolve_within(target, &base, modules, reexported, depth + 1);
            return found.or(Some(base));
        }
        break;
    }
    Some(base)
}

/// Finds the cycles among the children of each parent of one crate's modules.
pub fn cycles(src: &Path, files: &[PathBuf]) -> Vec<String> {
    let modules = modules(src, files);
    let reexported: Reexports = files
        .iter()
        .filter_map(|file| {
            let text = std::fs::read_to_string(file).ok()?;
            Some((module_of(src, file)?, reexports(&text)))
        })
        .collect();
    // Parent → (child → children it depends on).
    let mut graphs: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in files {
        let Some(from) = module_of(src, file) else {
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for path in referenced_paths(&text) {
            let Some(to) = resolve(&path, &from, &modules, &reexported) else {
                continue;
            };
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue; // a module and its ancestor or descendant
            }
            graphs
                .entry(from[..common].to_vec())
                .or_default()
                .entry(from[common].clone())
                .or_default()
                .insert(to[common].clone());
        }
    }
    let mut found = Vec::new();
    for (parent, graph) in &graphs {
        for cycle in find_cycles(graph) {
            let place = if parent.is_empty() {
                "crate root".to_owned()
            } else {
                parent.join("::")
            };
            found.push(format!(
                "{}: modules of {place} in a circle: {}",
                src.display(),
                cycle.join(" -> ")
            ));
        }
    }
    found
}

/// One cycle per strongly connected group of more than one module (smallest first).
fn find_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut reported: BTreeSet<String> = BTreeSet::new();
    let mut cycles = Vec::new();
    for start in graph.keys() {
        if reported.contains(start) {
            continue;
        }
        // Breadth-first back to `start`: the shortest cycle through it.
        let mut came_from: BTreeMap<&String, &String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut closed = None;
        while let Some(node) = queue.pop_front() {
            for next in graph.get(node).into_iter().flatten() {
                if next == start {
                    closed = Some(node);
                    break;
                }
                if !came_from.contains_key(next) {
                    came_from.insert(next, node);
                    queue.push_back(next);
                }
            }
            if closed.is_some() {
                break;
            }
        }
        if let Some(mut node) = closed {
            let mut cycle = vec![start.clone()];
            let mut back = Vec::new();
            while node != start {
                back.push(node.clone());
                node = came_from[node];
            }
            cycle.extend(back.into_iter().rev());
            cycle.push(start.clone());
            reported.extend(cycle.iter().cloned());
            cycles.push(cycle);
        }
    }
    cycles
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_trees_expand_to_every_path() {
        assert_eq!(
            expand("crate::{auth::Caller, input::{Id, not_found}, state}"),
            vec![
                "crate::auth::Caller",
                "crate::input::Id",
                "crate::input::not_found",
                "crate::state"
            ]
        );
        assert_eq!(
            expand("super::{self, Figure}"),
            vec!["super", "super::Figure"]
        );
    }

    #[test]
    fn a_circle_between_siblings_is_found_and_nesting_is_not_one() {
        let dir = std::env::temp_dir().join(format!("tidy-cycles-{}", std::process::id()));
        let src = dir.join("src");
        std::fs::create_dir_all(src.join("routes")).unwrap();
        let write = |path: &str, text: &str| std::fs::write(src.join(path), text).unwrap();
        write("lib.rs", "//! x\nmod openapi;\nmod routes;\n");
        write("openapi.rs", "//! x\nuse crate::routes::ENDPOINTS;\n");
        write("routes/mod.rs", "//! x\nmod doc;\nuse self::doc::X;\n");
        write(
            "routes/doc.rs",
            "//! x\nuse super::Y;\nfn f() { crate::openapi::render(); }\n",
        );
        let files: Vec<PathBuf> = ["lib.rs", "openapi.rs", "routes/mod.rs", "routes/doc.rs"]
            .iter()
            .map(|f| src.join(f))
            .collect();
        let found = cycles(&src, &files);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].ends_with("openapi -> routes -> openapi"),
            "{found:?}"
        );
        std::fs::write(src.join("routes/doc.rs"), "//! x\nuse super::Y;\n").unwrap();
        assert_eq!(cycles(&src, &files), Vec::<String>::new());
        // Through a re-export of the root: `crate::Error` is `error`'s.
        write(
            "lib.rs",
            "//! x\nmod error;\nmod openapi;\nmod routes;\npub use error::Error;\n",
        );
        write("error.rs", "//! x\nfn f() { crate::openapi::page(); }\n");
        let files: Vec<PathBuf> = ["lib.rs", "error.rs", "openapi.rs", "routes/mod.rs"]
            .iter()
            .map(|f| src.join(f))
            .collect();
        assert_eq!(cycles(&src, &files), Vec::<String>::new());
        write("openapi.rs", "//! x\nuse crate::Error;\n");
        let found = cycles(&src, &files);
        assert!(
            found.len() == 1 && found[0].ends_with("error -> openapi -> error"),
            "{found:?}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
