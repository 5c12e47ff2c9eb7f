//! ARCHITECTURE.md checked against the code: its table of the edges between workspace
//! crates is what `cargo metadata` resolves (normal dependencies; the table between the
//! `crate-edges` markers is generated, and a breach prints the table to paste), and every
//! file or directory its text names in backticks exists at the whole path it names: from the
//! repository's root, or, under a heading that names a directory (``### `crates/http` ``),
//! from that directory or its `src/`. A name is never looked up by its ending, so `error.rs`
//! under `crates/http` is `crates/http/src/error.rs` and not `scim/error.rs`.

use std::collections::BTreeSet;

use super::{Graph, tree::tracked};
use crate::files::project_root;

const BEGIN: &str = "<!-- crate-edges:begin (generated from cargo metadata; tidy checks it) -->";
const END: &str = "<!-- crate-edges:end -->";

/// Endings of the names ARCHITECTURE.md gives files by.
const FILE_ENDINGS: &[&str] = &[
    ".rs", ".md", ".toml", ".json", ".sql", ".sh", ".yaml", ".yml", ".hbs", ".py", ".ts",
];

/// The short name of a workspace crate in the table (`posture-http` → `http`).
fn short(name: &str) -> &str {
    name.strip_prefix("posture-").unwrap_or(name)
}

/// The table of edges between workspace crates: each member (fewest workspace
/// dependencies first, then by name) with the members it depends on.
pub(super) fn edges_table(graph: &Graph) -> String {
    let members: BTreeSet<&str> = graph.members.iter().map(String::as_str).collect();
    let mut rows: Vec<(usize, &str, Vec<&str>)> = members
        .iter()
        .map(|name| {
            let deps: Vec<&str> = graph
                .direct(name)
                .into_iter()
                .filter(|d| members.contains(d))
                .map(short)
                .collect();
            (
                graph
                    .closure(name)
                    .iter()
                    .filter(|d| members.contains(*d))
                    .count(),
                *name,
                deps,
            )
        })
        .collect();
    rows.sort();
    let mut table = String::from("| crate | depends on |\n|---|---|\n");
    for (_, name, deps) in rows {
        let deps = if deps.is_empty() {
            "nothing of the workspace".to_owned()
        } else {
            deps.join(", ")
        };
        table.push_str(&format!("| `{name}` | {deps} |\n"));
    }
    table
}

/// The generated part of `text`, between the markers.
fn generated_part(text: &str) -> Option<&str> {
    let start = text.find(BEGIN)? + BEGIN.len();
    let end = start + text[start..].find(END)?;
    Some(text[start..end].trim_matches('\n'))
}

/// The names in backticks that look like files or directories of the repository.
pub(super) fn named_paths(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| {
            !t.is_empty()
                && !t.contains(|c: char| c.is_whitespace() || "{}<>*$:=|()[],".contains(c))
                && !t.starts_with('/')
                && !t.starts_with("target/")
                && (FILE_ENDINGS.iter().any(|e| t.ends_with(e))
                    || (t.ends_with('/') && t.len() > 1))
        })
        .collect()
}

/// The directory a heading names (``### `crates/http` (posture-http)`` → `crates/http`).
fn heading_directory(line: &str) -> Option<&str> {
    let name = line
        .trim_start_matches('#')
        .trim_start()
        .strip_prefix('`')?;
    let name = &name[..name.find('`')?];
    Some(name.trim_end_matches('/')).filter(|n| !n.is_empty() && !n.contains(' '))
}

/// Each name with the directory of the heading it stands under, if that heading names one.
/// Backticks pair across the lines of a section (a name may open on one line and close on
/// the next); fenced code blocks are not read.
fn names_by_section(text: &str) -> Vec<(Option<&str>, String)> {
    let mut sections: Vec<(Option<&str>, String)> = vec![(None, String::new())];
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if line.starts_with('#') {
            sections.push((heading_directory(line), String::new()));
        } else if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    sections
        .iter()
        .flat_map(|(directory, body)| {
            named_paths(body)
                .into_iter()
                .map(|name| (*directory, name.to_owned()))
        })
        .collect()
}

/// Whether `path` is a tracked file, or (ending in `/`) a directory holding one.
fn tracked_path(path: &str, files: &[String]) -> bool {
    if path.ends_with('/') {
        files.iter().any(|f| f.starts_with(path))
    } else {
        files.iter().any(|f| f == path)
    }
}

/// Whether `name` is a whole path: from the root, or from `directory` or its `src/`.
fn exists(directory: Option<&str>, name: &str, files: &[String]) -> bool {
    tracked_path(name, files)
        || directory.is_some_and(|d| {
            tracked_path(&format!("{d}/{name}"), files)
                || tracked_path(&format!("{d}/src/{name}"), files)
        })
}

/// Breaches of the map.
pub(super) fn architecture_map(graph: &Graph) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(project_root().join("ARCHITECTURE.md")) else {
        return vec!["ARCHITECTURE.md: not readable".to_owned()];
    };
    let mut found = Vec::new();
    let expected = edges_table(graph);
    match generated_part(&text) {
        Some(table) if table == expected.trim_end() => {}
        Some(_) => found.push(format!(
            "ARCHITECTURE.md: the crate-edge table differs from cargo metadata; it is:\n{expected}"
        )),
        None => found.push(format!("ARCHITECTURE.md: no `{BEGIN}` … `{END}` table")),
    }
    let files = tracked();
    for (directory, name) in names_by_section(&text) {
        if !exists(directory, &name, &files) {
            let under = directory.map_or(String::new(), |d| format!(" (under `{d}`)"));
            found.push(format!(
                "ARCHITECTURE.md names `{name}`{under}, which is no tracked path: write it whole"
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_read_from_backticks_and_resolved_whole() {
        let text = "# Map\nsee `crates/http/src/gate.rs`, `cargo xtask test`, `/api/v1/findings`, \
                    `Endpoint`, `http.rs`\n### `crates/http` (posture-http)\n`gate.rs`, \
                    `error.rs`, `routes/`, `a\nb`, `export.rs`, `tests/it.rs`\n```\n`x.rs\n```\n\
                    ## Invariants\n`gate.rs`";
        let names = names_by_section(text);
        assert_eq!(
            names
                .iter()
                .map(|(d, n)| (*d, n.as_str()))
                .collect::<Vec<_>>(),
            [
                (None, "crates/http/src/gate.rs"),
                (None, "http.rs"),
                (Some("crates/http"), "gate.rs"),
                (Some("crates/http"), "error.rs"),
                (Some("crates/http"), "routes/"),
                (Some("crates/http"), "export.rs"),
                (Some("crates/http"), "tests/it.rs"),
                (None, "gate.rs"),
            ]
        );
        let files: Vec<String> = [
            "crates/http/src/gate.rs",
            "crates/http/src/routes/export/mod.rs",
            "crates/http/src/scim/error.rs",
            "crates/http/tests/it.rs",
        ]
        .map(str::to_owned)
        .into();
        let found: Vec<bool> = names.iter().map(|(d, n)| exists(*d, n, &files)).collect();
        // The ending of a path is not the path: `error.rs` under crates/http is not
        // `scim/error.rs`, `export.rs` is not `routes/export/mod.rs`, and outside a crate's
        // section `gate.rs` is nothing.
        assert_eq!(found, [true, false, true, false, true, false, true, false]);
    }
}
