//! The documentation's examples, executed or checked (docs/clients.md, "Executed
//! documentation"). Every fenced block of `README.md` and `docs/*.md` says on the line
//! before it how it is checked, in an HTML comment the rendered page does not show:
//!
//! ```text
//! <!-- doc-check: run -->                 bash, against a served posture (`cargo xtask clients`)
//! <!-- doc-check: console -->             `$ command` lines and their output (trycmd's form:
//!                                         `? failed` for a non-zero exit, `[..]` and `...`
//!                                         wildcards), run the same way
//! <!-- doc-check: output -->              what the `run` block before it prints
//! <!-- doc-check: file NAME -->           written as NAME where the document's blocks run
//! <!-- doc-check: module NAME -->         a module the generated clients' suites import
//! <!-- doc-check: response OPERATION [STATUS] -->   JSON valid against the contract
//! <!-- doc-check: schema COMPONENT -->    JSON valid against a component of the contract
//! <!-- doc-check: ndjson COMPONENT -->    each line valid against the component
//! <!-- doc-check: webhook EVENT -->       JSON valid against the event's delivery body
//! <!-- doc-check: ingest -->              each line an ingest record the parser accepts
//! <!-- doc-check: cef -->                 each line a CEF line an independent parser reads
//! <!-- doc-check: test NAME -->           checked by the named test (which must exist)
//! <!-- doc-check: not-run: REASON -->     not run, and why
//! ```
//!
//! Several checks of one block are separated by `;`. A block without a marker fails the
//! tests below, so a new example says how it is checked. The static checks run with every
//! `cargo test`; `run`, `console`, `output`, `file` and `module` blocks run in `cargo xtask
//! clients` (`run.rs`).

pub mod run;

use std::path::{Path, PathBuf};

use crate::files::project_root;

/// How a block is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    Run,
    Console,
    Output,
    File(String),
    Module(String),
    Response {
        operation: String,
        status: Option<u16>,
    },
    Schema(String),
    Ndjson(String),
    Webhook(String),
    Ingest,
    Cef,
    Test(String),
    NotRun(String),
}

impl Check {
    fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Some(reason) = text.strip_prefix("not-run:") {
            let reason = reason.trim();
            if reason.is_empty() {
                return Err("not-run needs a reason".into());
            }
            return Ok(Check::NotRun(reason.to_owned()));
        }
        let mut words = text.split_whitespace();
        let kind = words.next().unwrap_or_default();
        let mut arg = || {
            words
                .next()
                .map(str::to_owned)
                .ok_or_else(|| format!("`{kind}` needs an argument"))
        };
        Ok(match kind {
            "run" => Check::Run,
            "console" => Check::Console,
            "output" => Check::Output,
            "ingest" => Check::Ingest,
            "cef" => Check::Cef,
            "file" => Check::File(arg()?),
            "module" => Check::Module(arg()?),
            "schema" => Check::Schema(arg()?),
            "ndjson" => Check::Ndjson(arg()?),
            "webhook" => Check::Webhook(arg()?),
            "test" => Check::Test(arg()?),
            "response" => {
                let operation = arg()?;
                let status = match words.next() {
                    Some(status) => Some(status.parse().map_err(|_| format!("status {status}"))?),
                    None => None,
                };
                Check::Response { operation, status }
            }
            other => return Err(format!("unknown check `{other}`")),
        })
    }
}

/// A fenced block of a document and how it is checked.
#[derive(Clone, Debug)]
pub struct Block {
    /// Relative to the repository's root.
    pub file: PathBuf,
    /// The line of its opening fence (1-based).
    pub line: usize,
    pub text: String,
    pub checks: Vec<Check>,
}

impl Block {
    pub fn place(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }

    pub fn has(&self, check: &Check) -> bool {
        self.checks.contains(check)
    }
}

/// The documents whose examples are checked.
pub fn documents() -> Vec<PathBuf> {
    let root = project_root();
    let mut files = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "md"))
                .filter_map(|p| p.strip_prefix(&root).ok().map(Path::to_path_buf))
                .collect()
        })
        .unwrap_or_default();
    docs.sort();
    files.extend(docs);
    files
}

const MARKER: &str = "<!-- doc-check:";

/// The fenced blocks of one document (at the top level or indented in a list), with their
/// checks; an error for a block without a marker or with a marker that does not parse.
pub fn blocks(file: &Path, text: &str) -> Vec<Result<Block, String>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        if !line.starts_with("```") {
            i += 1;
            continue;
        }
        let indent = lines[i].len() - line.len();
        let start = i;
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && lines[i].trim_start() != "```" {
            body.push(lines[i].get(indent..).unwrap_or(lines[i].trim_start()));
            i += 1;
        }
        i += 1;
        let place = format!("{}:{}", file.display(), start + 1);
        let marker = lines[..start]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim())
            .filter(|l| l.starts_with(MARKER));
        let Some(marker) = marker else {
            found.push(Err(format!(
                "{place}: no `{MARKER} ... -->` on the line before the block (say how it is checked)"
            )));
            continue;
        };
        let inner = marker
            .trim_start_matches(MARKER)
            .trim_end_matches("-->")
            .trim();
        // `not-run:` takes the rest of the marker: its reason may hold a `;`.
        let (checks, reason) = match inner.find("not-run:") {
            Some(at) => (&inner[..at], Some(&inner[at..])),
            None => (inner, None),
        };
        let checks: Result<Vec<Check>, String> = checks
            .split(';')
            .filter(|c| !c.trim().is_empty())
            .chain(reason)
            .map(Check::parse)
            .collect();
        found.push(
            checks
                .map(|checks| Block {
                    file: file.to_path_buf(),
                    line: start + 1,
                    text: body.join("\n") + "\n",
                    checks,
                })
                .map_err(|e| format!("{place}: {e}")),
        );
    }
    found
}

/// Every block of every document.
pub fn all_blocks() -> anyhow::Result<Vec<Block>> {
    let mut all = Vec::new();
    let mut errors = Vec::new();
    for file in documents() {
        let text = std::fs::read_to_string(project_root().join(&file))?;
        for block in blocks(&file, &text) {
            match block {
                Ok(block) => all.push(block),
                Err(e) => errors.push(e),
            }
        }
    }
    anyhow::ensure!(errors.is_empty(), "{}", errors.join("\n"));
    Ok(all)
}

#[cfg(test)]
mod checks;
