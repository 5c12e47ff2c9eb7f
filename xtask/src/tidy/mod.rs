//! `cargo xtask tidy`: the rules of the codebase that a compiler does not check, checked on
//! every `cargo test` too (each rule is a test below).
//!
//! 1. Every Rust file opens with a `//!` line saying what it is for (tests too).
//! 2. No Rust file passes 500 lines.
//! 3. No module is called `util`, `utils`, `helpers` or `common`: a name says what it holds.
//! 4. No circles between the modules under one parent (`cycles.rs`).
//! 5. The layering of ARCHITECTURE.md, read from `cargo metadata` (once per process):
//!    `posture-domain` knows no I/O technology; `posture-http` and `posture-console` no
//!    adapter; every adapter (`store-postgres`, `rate-limit`, `delivery`, `oidc`) depends on the
//!    domain and on no other adapter; and of the shipped crates only `posture-egress` (the
//!    one guarded way out to hosts customers control) and its two users, `posture-delivery`
//!    (customers' receivers) and `posture-oidc` (customers' identity providers), depend on
//!    reqwest.
//! 6. Git tracks nothing outside the top-level layout and no binary archive or executable
//!    unless listed with its reason (`tree.rs`).
//! 7. ARCHITECTURE.md's crate-edge table is what cargo metadata resolves, and every file it
//!    names exists at the whole path it gives (`map.rs`).
//! 8. Every document a file cites is in the repository (`citations.rs`).
//! 9. Shipped code reads the `Clock` it is given, not the system's (`clock.rs`).

use std::{
    collections::{BTreeSet, HashMap},
    path::{Path, PathBuf},
    sync::OnceLock,
};

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::{files::project_root, process::eprintln_status};

mod citations;
mod clock;
mod cycles;
mod layers;
mod map;
mod tree;

/// Longest a Rust file may be.
const MAX_LINES: usize = 500;
/// Module names that say nothing of what they hold.
const VAGUE_NAMES: &[&str] = &["util", "utils", "helpers", "helper", "common"];
/// The adapters: each implements the domain's ports on one technology.
const ADAPTERS: &[&str] = &[
    "posture-store-postgres",
    "posture-rate-limit",
    "posture-delivery",
    "posture-oidc",
];

/// The shipped crates that send HTTP: the guarded client and its two users, and the
/// customers' CLI, which runs on the customer's machine and speaks only to the posture URL
/// and the receiver its user names (no address an outsider chooses, so nothing to guard).
const HTTP_CLIENTS: &[&str] = &[
    "posture-egress",
    "posture-delivery",
    "posture-oidc",
    "posture-cli",
];

/// Runs every rule; fails listing every breach.
pub fn run() -> anyhow::Result<()> {
    let breaches: Vec<String> = [
        module_docs(),
        file_lengths(),
        vague_modules(),
        module_cycles(),
        layers::upward_imports(&rust_files()),
        tree::tree(),
        layering().context("reading cargo metadata")?,
        map::architecture_map(graph().context("reading cargo metadata")?),
        citations::citations(),
        clock::direct_clock_reads(),
    ]
    .concat();
    if breaches.is_empty() {
        eprintln_status("tidy: every rule holds");
        return Ok(());
    }
    for breach in &breaches {
        eprintln_status(breach);
    }
    bail!("{} tidy rule(s) broken", breaches.len())
}

/// The Rust files of the repository (crates and xtask; never `target/`).
fn rust_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let root = project_root();
    let mut files = Vec::new();
    walk(&root.join("crates"), &mut files);
    walk(&root.join("xtask"), &mut files);
    files.sort();
    files
}

fn shown(path: &Path) -> String {
    path.strip_prefix(project_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

fn module_docs() -> Vec<String> {
    rust_files()
        .into_iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            !text
                .lines()
                .find(|l| !l.trim().is_empty())
                .is_some_and(|l| l.starts_with("//!"))
        })
        .map(|path| format!("{}: does not open with a `//!` line", shown(&path)))
        .collect()
}

fn file_lengths() -> Vec<String> {
    rust_files()
        .into_iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(&path).ok()?.lines().count();
            (lines > MAX_LINES)
                .then(|| format!("{}: {lines} lines (at most {MAX_LINES})", shown(&path)))
        })
        .collect()
}

fn vague_modules() -> Vec<String> {
    let mut found = Vec::new();
    for path in rust_files() {
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let dir = path
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|s| s.to_str())
            .unwrap_or("");
        let named = if stem == "mod" { dir } else { stem };
        if VAGUE_NAMES.contains(&named) {
            found.push(format!("{}: a module named {named}", shown(&path)));
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in text.lines() {
            let declared = line
                .trim_start()
                .trim_start_matches("pub ")
                .trim_start_matches("pub(crate) ")
                .strip_prefix("mod ")
                .map(|rest| rest.trim_end_matches([';', '{', ' ']));
            if let Some(name) = declared.filter(|n| VAGUE_NAMES.contains(n)) {
                found.push(format!("{}: declares `mod {name}`", shown(&path)));
            }
        }
    }
    found
}

/// Circles between modules, crate root by crate root (`src/` of each package, each test
/// binary's directory, xtask).
fn module_cycles() -> Vec<String> {
    let files = rust_files();
    let roots: Vec<PathBuf> = files
        .iter()
        .filter(|f| {
            f.file_name()
                .is_some_and(|n| n == "lib.rs" || n == "main.rs")
        })
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect();
    let mut found = Vec::new();
    for root in &roots {
        // The files of this root, not of a deeper root (a test binary inside `src/`).
        let mine: Vec<PathBuf> = files
            .iter()
            .filter(|f| {
                f.starts_with(root)
                    && !roots.iter().any(|other| {
                        other != root && other.starts_with(root) && f.starts_with(other)
                    })
            })
            .cloned()
            .collect();
        found.extend(
            cycles::cycles(root, &mine)
                .into_iter()
                .map(|c| c.replace(&format!("{}/", project_root().display()), "")),
        );
    }
    found
}

/// The workspace's packages and their resolved normal (not dev, not build) dependencies.
struct Graph {
    /// Package id → name.
    names: HashMap<String, String>,
    /// Package id → ids of its normal dependencies.
    deps: HashMap<String, Vec<String>>,
    /// Names of the workspace's own packages.
    members: Vec<String>,
    /// Package name → whether it lives under `crates/` (shipped).
    shipped: HashMap<String, bool>,
}

/// `cargo metadata`, read once per process.
fn graph() -> anyhow::Result<&'static Graph> {
    static GRAPH: OnceLock<Graph> = OnceLock::new();
    if let Some(graph) = GRAPH.get() {
        return Ok(graph);
    }
    let output = crate::process::cargo()
        .current_dir(project_root())
        .args(["metadata", "--format-version", "1", "--locked"])
        .output()?;
    if !output.status.success() {
        bail!("{}", String::from_utf8_lossy(&output.stderr));
    }
    let metadata: Value = serde_json::from_slice(&output.stdout)?;
    let packages = metadata["packages"].as_array().context("no packages")?;
    let names = packages
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?.to_owned(), p["name"].as_str()?.to_owned())))
        .collect::<HashMap<_, _>>();
    let crates_dir = project_root().join("crates");
    let shipped = packages
        .iter()
        .filter_map(|p| {
            let manifest = p["manifest_path"].as_str()?;
            Some((
                p["name"].as_str()?.to_owned(),
                Path::new(manifest).starts_with(&crates_dir),
            ))
        })
        .collect();
    let members = metadata["workspace_members"]
        .as_array()
        .context("no workspace members")?
        .iter()
        .filter_map(|id| names.get(id.as_str()?).cloned())
        .collect();
    let mut deps = HashMap::new();
    for node in metadata["resolve"]["nodes"]
        .as_array()
        .context("no resolve graph")?
    {
        let normal = node["deps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|k| k["kind"].is_null()))
            })
            .filter_map(|d| d["pkg"].as_str().map(str::to_owned))
            .collect();
        if let Some(id) = node["id"].as_str() {
            deps.insert(id.to_owned(), normal);
        }
    }
    Ok(GRAPH.get_or_init(|| Graph {
        names,
        deps,
        members,
        shipped,
    }))
}

impl Graph {
    fn id(&self, name: &str) -> Option<&String> {
        self.names
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(id, _)| id)
    }

    /// The names of what `name` depends on directly.
    fn direct(&self, name: &str) -> BTreeSet<&str> {
        self.id(name)
            .and_then(|id| self.deps.get(id))
            .into_iter()
            .flatten()
            .filter_map(|d| self.names.get(d).map(String::as_str))
            .collect()
    }

    /// The names of everything `name` depends on, transitively.
    fn closure(&self, name: &str) -> BTreeSet<&str> {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&String> = self.id(name).into_iter().collect();
        while let Some(id) = stack.pop() {
            for dep in self.deps.get(id).into_iter().flatten() {
                if let Some(dep_name) = self.names.get(dep)
                    && seen.insert(dep_name.as_str())
                {
                    stack.push(dep);
                }
            }
        }
        seen
    }
}

/// Breaches of the layering.
fn layering() -> anyhow::Result<Vec<String>> {
    let graph = graph()?;
    let mut found = Vec::new();
    let forbid = |found: &mut Vec<String>,
                  package: &str,
                  deps: &BTreeSet<&str>,
                  forbidden: &[&str],
                  why: &str| {
        for f in forbidden.iter().filter(|f| deps.contains(**f)) {
            found.push(format!("{package} depends on {f}: {why}"));
        }
    };
    forbid(
        &mut found,
        "posture-domain",
        &graph.closure("posture-domain"),
        &[
            "diesel",
            "diesel-async",
            "tokio",
            "tokio-postgres",
            "actix-web",
            "actix-http",
            "actix-rt",
            "redis",
            "deadpool",
            "deadpool-redis",
            "reqwest",
            "hyper",
            "mio",
        ],
        "the domain knows no I/O",
    );
    forbid(
        &mut found,
        "xtask",
        &graph.closure("xtask"),
        &[
            "actix-web",
            "reqwest",
            "tokio",
            "tokio-postgres",
            "diesel",
            "posture-http",
            "posture-test-support",
        ],
        "xtask builds in seconds (`cargo xtask tidy` on a fresh checkout); what runs posture \
         belongs to the lab (xtask/lab)",
    );
    for inbound in ["posture-http", "posture-console"] {
        forbid(
            &mut found,
            inbound,
            &graph.closure(inbound),
            &[ADAPTERS, &["diesel", "redis", "reqwest"]].concat(),
            "the HTTP API and the console call ports only",
        );
    }
    for adapter in ADAPTERS {
        let deps = graph.closure(adapter);
        if !deps.contains("posture-domain") {
            found.push(format!("{adapter} does not implement the domain's ports"));
        }
        let others: Vec<&str> = ADAPTERS
            .iter()
            .copied()
            .filter(|a| a != adapter)
            .chain(["posture-http", "actix-web"])
            .collect();
        forbid(
            &mut found,
            adapter,
            &deps,
            &others,
            "adapters do not know each other",
        );
    }
    for member in &graph.members {
        if !HTTP_CLIENTS.contains(&member.as_str())
            && graph.shipped.get(member).copied().unwrap_or(false)
            && graph.direct(member).contains("reqwest")
        {
            found.push(format!(
                "{member} depends on reqwest: only posture-egress (the guarded client), its \
                 users posture-delivery and posture-oidc, and the customers' posture-cli send HTTP"
            ));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_code_reads_the_clock_it_is_given() {
        assert_eq!(clock::direct_clock_reads(), Vec::<String>::new());
    }

    #[test]
    fn every_cited_document_is_in_the_repository() {
        assert_eq!(citations::citations(), Vec::<String>::new());
    }

    #[test]
    fn architecture_md_tells_the_truth_about_crates_and_files() {
        assert_eq!(
            map::architecture_map(graph().unwrap()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_tree_holds_no_stray_files() {
        assert_eq!(tree::tree(), Vec::<String>::new());
    }

    #[test]
    fn every_rust_file_opens_with_a_module_doc() {
        assert_eq!(module_docs(), Vec::<String>::new());
    }

    #[test]
    fn no_rust_file_passes_500_lines() {
        assert_eq!(file_lengths(), Vec::<String>::new());
    }

    #[test]
    fn no_module_has_a_vague_name() {
        assert_eq!(vague_modules(), Vec::<String>::new());
    }

    #[test]
    fn no_modules_depend_on_each_other_in_a_circle() {
        assert_eq!(module_cycles(), Vec::<String>::new());
    }

    #[test]
    fn each_crate_s_files_are_in_layers() {
        assert_eq!(layers::upward_imports(&rust_files()), Vec::<String>::new());
    }

    #[test]
    fn the_layering_holds() {
        assert_eq!(layering().unwrap(), Vec::<String>::new());
    }

    #[test]
    fn the_layering_rules_see_the_crates_they_name() {
        let graph = graph().unwrap();
        for adapter in ADAPTERS {
            assert!(graph.id(adapter).is_some(), "{adapter} is not a package");
        }
        assert!(graph.direct("posture-delivery").contains("reqwest"));
        assert_eq!(graph.shipped.get("posture-delivery"), Some(&true));
        assert_eq!(graph.shipped.get("xtask"), Some(&false));
    }
}
