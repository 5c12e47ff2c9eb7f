//! ARCHITECTURE.md checked against the code: its table of the edges between workspace
//! crates is what `cargo metadata` resolves (normal dependencies; the table between the
//! `crate-edges` markers is generated, and a breach prints the table to paste), and every
//! file or directory its text names in backticks exists (by its path from the root, or
//! as the end of a tracked path: `routes/export.rs` must still be a file somewhere).

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
                && !t.starts_with("http")
                && (FILE_ENDINGS.iter().any(|e| t.ends_with(e))
                    || (t.ends_with('/') && t.len() > 1))
        })
        .collect()
}

/// Whether a tracked file is `name` (from the root) or ends with it; a directory name
/// (`commands/`) is found inside a tracked path.
fn exists(name: &str, files: &[String]) -> bool {
    let within = format!("/{name}");
    files.iter().any(|f| {
        if name.ends_with('/') {
            f.starts_with(name) || f.contains(&within)
        } else {
            f == name || f.ends_with(&within)
        }
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
    for name in named_paths(&text) {
        if !exists(name, &files) {
            found.push(format!(
                "ARCHITECTURE.md names `{name}`, which no tracked path is"
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_read_from_backticks_and_looked_up_by_their_end() {
        let text = "see `crates/http/src/gate.rs`, `routes/export.rs`, `commands/`, \
                    `cargo xtask test`, `/api/v1/findings`, `Endpoint`, `a.rs`";
        assert_eq!(
            named_paths(text),
            [
                "crates/http/src/gate.rs",
                "routes/export.rs",
                "commands/",
                "a.rs"
            ]
        );
        let files = vec![
            "crates/http/src/gate.rs".to_owned(),
            "crates/http/src/routes/export/mod.rs".to_owned(),
            "crates/api/src/commands/keys.rs".to_owned(),
        ];
        assert!(exists("crates/http/src/gate.rs", &files));
        assert!(exists("gate.rs", &files));
        assert!(!exists("routes/export.rs", &files));
        assert!(exists("routes/export/mod.rs", &files));
        assert!(exists("commands/", &files));
        assert!(!exists("ate.rs", &files));
    }
}
