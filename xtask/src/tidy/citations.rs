//! Every document the repository cites is in the repository. A name ending in `.md` in a
//! tracked Rust, Markdown, TOML, YAML or shell file is a tracked file: by its path from the
//! root (leading `../` aside), from the citing file's directory, or under `docs/`. A link's
//! target (`[text](api.md)`) is what a reader's click opens: it must be a tracked file from
//! the citing file's directory, whatever else exists. Documents the tasks write at run time
//! are listed with what writes them.

use std::path::Path;

use super::tree::tracked;
use crate::files::project_root;

/// Names of documents written at run time, not tracked, and what writes each.
const WRITTEN: &[(&str, &str)] = &[
    ("report.md", "cargo xtask chaos and soak, under target/"),
    (
        "x.md",
        "a unit test of the docs' examples, naming a file it makes up",
    ),
];

/// The kinds of files whose citations are checked.
const CITING: &[&str] = &[".rs", ".md", ".toml", ".yaml", ".yml", ".sh"];

/// Characters a cited path is written with.
fn in_path(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./-".contains(c)
}

/// A document cited: its name as written, and whether it is a link's target.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Cited<'a> {
    name: &'a str,
    link: bool,
}

/// The names ending in `.md` that `text` cites (not web addresses, not `target/` outputs).
pub(super) fn cited(text: &str) -> Vec<Cited<'_>> {
    let mut names = Vec::new();
    for (at, _) in text.match_indices(".md") {
        let end = at + 3;
        if text[end..].chars().next().is_some_and(in_path) {
            continue;
        }
        let start = text[..at]
            .char_indices()
            .rev()
            .find(|(_, c)| !in_path(*c))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let name = &text[start..end];
        let web = text[..start].ends_with(':') || name.starts_with("//");
        if name.len() > 3 && !web && !name.contains("target/") {
            let link = text[..start].ends_with("](");
            names.push(Cited { name, link });
        }
    }
    names
}

/// Breaches: cited documents that are not in the repository.
pub(super) fn citations() -> Vec<String> {
    let files = tracked();
    let root = project_root();
    let mut found = Vec::new();
    // This file's own examples name documents that exist nowhere, on purpose.
    let citing = files.iter().filter(|f| {
        CITING.iter().any(|e| f.ends_with(e)) && f.as_str() != "xtask/src/tidy/citations.rs"
    });
    for file in citing {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        let directory = Path::new(file).parent().unwrap_or(Path::new(""));
        for Cited { name, link } in cited(&text) {
            let bare = name.trim_start_matches('/');
            let beside = normalise(&directory.join(bare));
            if link && file.ends_with(".md") {
                if !files.contains(&beside) {
                    found.push(format!(
                        "{file} links to `{name}`, which is no file from its directory \
                         (`{beside}`)"
                    ));
                }
                continue;
            }
            // `env!("CARGO_MANIFEST_DIR")` joined with `../../docs/cli.md`: from the root.
            let rooted = bare.trim_start_matches("../");
            let known = files.iter().any(|f| {
                f == bare || f == rooted || *f == beside || f.strip_prefix("docs/") == Some(bare)
            }) || WRITTEN.iter().any(|(w, _)| *w == bare);
            if !known {
                found.push(format!(
                    "{file} cites `{name}`, which is not in the repository"
                ));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// `a/b/../c.md` → `a/c.md`, as a tracked path is written.
fn normalise(path: &Path) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.iter().filter_map(|p| p.to_str()) {
        match part {
            "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cited_documents_are_read_whole_and_resolved_beside_the_citer() {
        let text = "see docs/api.md, `scim.md` and https://example.com/a/README.md; \
                    join(\"../../docs/cli.md\") writes target/chaos/report.md, not x.mdx";
        let names: Vec<&str> = cited(text).iter().map(|c| c.name).collect();
        assert_eq!(names, ["docs/api.md", "scim.md", "../../docs/cli.md"]);
        assert!(cited(text).iter().all(|c| !c.link));
        assert_eq!(
            normalise(Path::new("crates/api/tests/../../../docs/cli.md")),
            "docs/cli.md"
        );
    }

    #[test]
    fn a_links_target_is_told_from_a_mention() {
        let text = "[the API](api.md#errors) and api.md, [ops](./operations.md)";
        let found: Vec<(&str, bool)> = cited(text).iter().map(|c| (c.name, c.link)).collect();
        assert_eq!(
            found,
            [
                ("api.md", true),
                ("api.md", false),
                ("./operations.md", true)
            ]
        );
    }
}
