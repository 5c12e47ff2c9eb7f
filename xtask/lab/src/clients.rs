//! `cargo xtask clients`: what an API consumer gets, proven against a running posture
//! (docs/clients.md).
//!
//! 1. Lints `docs/openapi.json` with Spectral (`.spectral.yaml`: `spectral:oas` and posture's
//!    rules) and Redocly (`recommended`); any finding, warnings included, fails.
//! 2. Generates the Python client (openapi-python-client, PyPI) and the TypeScript types
//!    (openapi-typescript, npm; used with openapi-fetch) into `target/clients/`.
//! 3. Serves posture-api on a throwaway PostgreSQL with one customer of demo data and the
//!    keys the suites need, and runs the pytest suite (`xtask/clients/python/`) and the
//!    TypeScript suite (`xtask/clients/typescript/`, type-checked by `tsc --strict`, run by
//!    node's test runner) through the generated clients.
//! 4. Loads the API reference page (`/api/v1/docs`) in headless Chromium, checks that the
//!    rendered page lists every operation and that the Content-Security-Policy refused
//!    nothing, and keeps a screenshot in `target/clients/docs-page.png`.
//!
//! 5. Runs scim2-tester (`scim2 test`, PyPI `scim2-cli`) against `/scim/v2` of a second
//!    instance on the same database (`scim_check.rs`).
//!
//! Fails when posture-api logs an ERROR line.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};
use base64::Engine as _;

use crate::{
    binaries::{
        Guard, api_json, api_serve, build_binaries, create_customer, every_scope, ingest_demo_data,
        issue_key, rand_bytes, wait_until_listening,
    },
    demo_data::CustomerSpec,
    doc_examples::{self, run::Served},
    files::{project_root, scratch_dir},
    process::{eprintln_status, npm_ci, on_path, output, python_venv, run},
    servers::free_port,
};

/// The Python generator and test runner, pinned.
const PYTHON_PACKAGES: &[&str] = &[
    "openapi-python-client==0.29.1",
    "pytest==8.4.2",
    // The worked loop of docs/api.md uses requests alone.
    "requests==2.32.5",
    // Its events stream uses an SSE library we did not write (httpx comes with the client).
    "httpx-sse==0.4.3",
    // docs/auth.md's OAuth examples and the OAuth suite: a client library we did not write.
    "authlib==1.9.10",
];

/// Requests a key may make per minute in this run: low, so the suites can reach 429.
const RATE_LIMIT: &str = "100";

/// The paths the run uses.
struct Dirs {
    root: PathBuf,
    out: PathBuf,
    node: PathBuf,
}

pub fn run_clients() -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    for program in ["node", "npm", "chromium"] {
        if on_path(program).is_none() {
            bail!("{program} is missing: apt-get install -y nodejs npm chromium");
        }
    }
    let root = project_root();
    let dirs = Dirs {
        out: root.join("target").join("clients"),
        node: root.join("target").join("clients").join("node"),
        root,
    };
    std::fs::create_dir_all(&dirs.out)?;
    npm_ci(
        &dirs.root.join("xtask").join("clients"),
        &dirs.node,
        "Spectral, Redocly, openapi-typescript, openapi-fetch, TypeScript",
    )?;
    lint(&dirs)?;
    let venv = dirs.out.join("venv");
    python_venv(&venv, PYTHON_PACKAGES)?;
    generate_python(&dirs, &venv)?;
    generate_typescript(&dirs)?;

    let bin = build_binaries()?;
    let postgres = crate::servers::postgres("clients-postgres", "")?;
    let secret_key = base64::engine::general_purpose::STANDARD.encode(rand_bytes()?);
    let env = [
        ("DATABASE_URL", postgres.url.as_str()),
        ("POSTURE_SECRET_KEY", secret_key.as_str()),
    ];
    api_json(&bin, &env, &["migrate"])?;
    let customer = demo_customer(&bin, &env)?;
    let mut keys = crate::suite_credentials::suite_keys(&bin, &env, &customer)?;
    keys.extend(crate::suite_credentials::suite_clients(
        &bin,
        &env,
        &customer,
        &dirs.out.join("oauth"),
    )?);
    let docs_key = issue_key(&bin, &env, &customer, "docs", &every_scope())?;

    let bind = format!("127.0.0.1:{}", free_port()?);
    let base = format!("http://{bind}");
    let api_log = dirs.out.join("posture-api.log");
    let mut serve = api_server(&bin, &env, &bind, &api_log)?;
    let running = Guard(vec![serve.spawn().context("starting posture-api serve")?]);
    wait_until_listening(&bind)?;

    let suite_env = suite_env(keys, &base, &customer, &bin, &postgres.url);
    let documented = documentation(&dirs, &bin, &base, &customer, &docs_key, &suite_env);
    let python = documented
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e:#}"))
        .and_then(|_| python_suite(&dirs, &venv, &suite_env));
    let typescript = documented
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e:#}"))
        .and_then(|_| typescript_suite(&dirs, &suite_env));
    let examples = documented.and_then(|served| run_documented(&dirs, &venv, &served));
    let page = crate::docs_page_check::check(&base, &dirs.out);
    drop(running);
    let scim = crate::scim_check::run(&bin, &env, &dirs.out);
    drop(postgres);
    python?;
    typescript?;
    let ran = examples?;
    page?;
    let scim_checks = scim?;
    let logged = std::fs::read_to_string(&api_log).unwrap_or_default();
    let errors: Vec<&str> = logged.lines().filter(|l| l.contains("ERROR")).collect();
    if !errors.is_empty() {
        bail!(
            "posture-api logged ERROR lines while the clients ran:\n{}",
            errors.join("\n")
        );
    }
    eprintln_status(&format!(
        "clients: contract lint clean, Python and TypeScript suites passed, {ran} documented \
         examples ran as written, the reference page lists every operation, scim2 test passed \
         {scim_checks} checks ({:.0} s)",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// `posture-api serve` for the suites: on `bind`, logging to `log`.
fn api_server(bin: &Path, env: &[(&str, &str)], bind: &str, log: &Path) -> anyhow::Result<Command> {
    let mut serve = api_serve(bin, env, bind, log)?;
    serve
        .env("POSTURE_RATE_LIMIT", RATE_LIMIT)
        .env("POSTURE_WEBHOOK_ALLOW_PRIVATE", "true")
        // Streams of the events feed end after 2 s, so the documented examples that follow
        // one (curl, events_stream.py) end, and reconnect, within the suite's time.
        .env("POSTURE_EVENT_STREAM_SECS", "2")
        .env("POSTURE_LOG", "info");
    Ok(serve)
}

/// What every suite reads from its environment: `keys`, then where posture runs and what
/// it holds.
fn suite_env(
    keys: Vec<(String, String)>,
    base: &str,
    customer: &str,
    bin: &Path,
    database_url: &str,
) -> Vec<(String, String)> {
    keys.into_iter()
        .chain([
            ("POSTURE_URL".to_owned(), base.to_owned()),
            ("CUSTOMER_ID".to_owned(), customer.to_owned()),
            ("CUSTOMER_NAME".to_owned(), CUSTOMER_NAME.to_owned()),
            ("RATE_LIMIT".to_owned(), RATE_LIMIT.to_owned()),
            (
                "POSTURE_API_BIN".to_owned(),
                bin.join("posture-api").display().to_string(),
            ),
            ("DATABASE_URL".to_owned(), database_url.to_owned()),
            ("POSTURE_LOG".to_owned(), "warn".to_owned()),
        ])
        .collect()
}

const CUSTOMER_NAME: &str = "Contoso Group";

/// One customer with demo data; returns its id.
fn demo_customer(bin: &Path, env: &[(&str, &str)]) -> anyhow::Result<String> {
    let customer = create_customer(bin, env, CUSTOMER_NAME)?;
    let spec = CustomerSpec {
        name: CUSTOMER_NAME.into(),
        tenants: 2,
        identities: 60,
        findings: 250,
        upr_days: 14,
        seed: 7,
    };
    let file = scratch_dir("clients-data")?.join("contoso.jsonl");
    ingest_demo_data(bin, env, &customer, &spec, &file)?;
    Ok(customer)
}

/// Spectral, then Redocly (its `recommended` rules, a second opinion) on the committed
/// contract: nothing at all may be reported by either.
fn lint(dirs: &Dirs) -> anyhow::Result<()> {
    let contract = dirs.root.join("docs").join("openapi.json");
    eprintln_status("linting docs/openapi.json (Spectral, .spectral.yaml)");
    run(Command::new(dirs.node.join("node_modules/.bin/spectral"))
        .args(["lint", "--fail-severity=hint", "--ruleset"])
        .arg(dirs.root.join(".spectral.yaml"))
        .arg(&contract))?;
    eprintln_status("linting docs/openapi.json (Redocly, recommended)");
    let report = Command::new(dirs.node.join("node_modules/.bin/redocly"))
        .args(["lint", "--format=json"])
        .arg(&contract)
        .output()
        .context("running redocly")?;
    let totals: serde_json::Value = serde_json::from_slice(&report.stdout)
        .map(|r: serde_json::Value| r["totals"].clone())
        .context("reading redocly's report")?;
    if totals["errors"] != 0 || totals["warnings"] != 0 {
        bail!(
            "Redocly reports {totals} on docs/openapi.json: run `npx redocly lint docs/openapi.json` \
             in target/clients/node"
        );
    }
    Ok(())
}

fn generate_python(dirs: &Dirs, venv: &Path) -> anyhow::Result<()> {
    let package = dirs.out.join("python").join("posture_client");
    eprintln_status("generating the Python client (openapi-python-client)");
    run(Command::new(venv.join("bin").join("openapi-python-client"))
        .args(["generate", "--meta", "none", "--overwrite", "--config"])
        .arg(dirs.root.join("xtask/clients/python/generator.yaml"))
        .arg("--path")
        .arg(dirs.root.join("docs").join("openapi.json"))
        .arg("--output-path")
        .arg(&package)
        .stdout(Stdio::null()))?;
    let (files, bytes) = tree_size(&package)?;
    let shown = format!("{files} files, {:.0} KB", bytes as f64 / 1024.0);
    eprintln_status(&format!("Python client: {shown}"));
    documented_size_holds(&dirs.root, "| Python |", " files, ", Some(files), bytes)
}

/// Whether docs/clients.md's row starting with `row` still states the generated size: the
/// number before `files_mark` (the file count, when given) exactly, and the KB figure
/// after it within a tenth.
fn documented_size_holds(
    root: &Path,
    row: &str,
    files_mark: &str,
    files: Option<u64>,
    bytes: u64,
) -> anyhow::Result<()> {
    let docs = std::fs::read_to_string(root.join("docs/clients.md"))?;
    let line = docs
        .lines()
        .find(|line| line.starts_with(row))
        .with_context(|| format!("docs/clients.md has no row {row}"))?;
    let number_before = |text: &str, mark: &str| -> Option<u64> {
        let before = &text[..text.find(mark)?];
        let digits: String = before
            .chars()
            .rev()
            .take_while(char::is_ascii_digit)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        digits.parse().ok()
    };
    let stated_kb = number_before(line.split(files_mark).last().unwrap_or(line), " KB");
    let kb = bytes as f64 / 1024.0;
    let files_hold = files.is_none_or(|files| number_before(line, files_mark) == Some(files));
    let kb_holds = stated_kb.is_some_and(|stated| (stated as f64 - kb).abs() <= kb / 10.0);
    anyhow::ensure!(
        files_hold && kb_holds,
        "docs/clients.md states another size ({line}): the client is now {}{kb:.0} KB; \
         correct the row",
        files.map_or(String::new(), |files| format!("{files} files, "))
    );
    Ok(())
}

fn generate_typescript(dirs: &Dirs) -> anyhow::Result<()> {
    let out = dirs.out.join("typescript");
    std::fs::create_dir_all(&out)?;
    eprintln_status("generating the TypeScript types (openapi-typescript)");
    run(
        Command::new(dirs.node.join("node_modules/.bin/openapi-typescript"))
            .arg(dirs.root.join("docs").join("openapi.json"))
            .arg("--output")
            .arg(out.join("posture.d.ts"))
            .arg("--silent"),
    )?;
    let bytes = std::fs::metadata(out.join("posture.d.ts"))?.len();
    eprintln_status(&format!(
        "TypeScript types: {:.0} KB",
        bytes as f64 / 1024.0
    ));
    documented_size_holds(&dirs.root, "| TypeScript |", "| one ", None, bytes)
}

fn python_suite(dirs: &Dirs, venv: &Path, env: &[(String, String)]) -> anyhow::Result<()> {
    eprintln_status("the Python client's suite (pytest)");
    let suite = dirs.root.join("xtask/clients/python");
    succeeds(
        Command::new(venv.join("bin").join("python"))
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(suite.join("test_client.py"))
            .arg(suite.join("test_sync.py"))
            .arg(suite.join("test_oauth.py"))
            .env("PYTHONPATH", dirs.out.join("python"))
            .envs(env.iter().map(|(k, v)| (k, v))),
        "the Python client's suite",
    )
}

fn typescript_suite(dirs: &Dirs, env: &[(String, String)]) -> anyhow::Result<()> {
    let out = dirs.out.join("typescript");
    let source = dirs.root.join("xtask/clients/typescript");
    for file in ["client.test.ts", "sync.test.ts", "tsconfig.json"] {
        std::fs::copy(source.join(file), out.join(file))?;
    }
    // The packages resolve from the installed node_modules.
    let link = out.join("node_modules");
    if !link.exists() {
        std::os::unix::fs::symlink(dirs.node.join("node_modules"), &link)?;
    }
    eprintln_status("the TypeScript client's suite (tsc --strict, node --test)");
    run(Command::new(dirs.node.join("node_modules/.bin/tsc"))
        .args(["--project", "tsconfig.json"])
        .current_dir(&out))
    .context("the TypeScript suite does not type-check against the generated types")?;
    succeeds(
        Command::new("node")
            .args(["--test", "dist/client.test.js", "dist/sync.test.js"])
            .current_dir(&out)
            .envs(env.iter().map(|(k, v)| (k, v))),
        "the TypeScript client's suite",
    )
}

/// The documentation's examples against the served instance (`doc_examples`): a
/// subscription for `$WEBHOOK`, the blocks the suites import written next to the generated
/// clients; returns where and with what the examples run.
fn documentation(
    dirs: &Dirs,
    bin: &Path,
    base: &str,
    customer: &str,
    key: &str,
    suite_env: &[(String, String)],
) -> anyhow::Result<Served> {
    let created = output(
        Command::new("curl")
            .args(["-sSf", "-X", "POST", "-H", "Content-Type: application/json", "-H"])
            .arg(format!("Authorization: Bearer {key}"))
            .arg("-d")
            .arg(r#"{"name":"docs","webhookUrl":"https://siem.example.com/hooks/posture","webhookType":"generic","eventTypes":["finding_critical"]}"#)
            .arg(format!("{base}/api/v1/webhooks")),
    )
    .context("creating the documentation's subscription")?;
    let webhook: serde_json::Value = serde_json::from_str(&created)?;
    let webhook = webhook["data"]["id"].as_str().context("its id")?.to_owned();
    let mut env: Vec<(String, String)> = suite_env
        .iter()
        .filter(|(k, _)| {
            matches!(k.as_str(), "DATABASE_URL" | "POSTURE_LOG")
                || k.starts_with("CLIENT_")
                || k == "KEY_CLIENT_ID"
        })
        .cloned()
        .collect();
    for name in ["KEY", "API_KEY", "POSTURE_API_KEY"] {
        env.push((name.to_owned(), key.to_owned()));
    }
    env.push(("CUSTOMER".to_owned(), customer.to_owned()));
    env.push(("WEBHOOK".to_owned(), webhook));
    // The customers' CLI (docs/cli.md) reads the service's address from the environment.
    env.push(("POSTURE_URL".to_owned(), base.to_owned()));
    let served = Served {
        base: base.to_owned(),
        env,
        bin_dir: bin.to_path_buf(),
        scratch: dirs.out.join("docs"),
    };
    std::fs::create_dir_all(&served.scratch)?;
    let blocks = doc_examples::all_blocks()?;
    for (name, text) in doc_examples::run::modules(&blocks, &served) {
        let dir = if name.ends_with(".py") {
            "python"
        } else {
            "typescript"
        };
        std::fs::write(dirs.out.join(dir).join(&name), text)?;
    }
    Ok(served)
}

/// The quick starts (after the suites: the TypeScript one is compiled with them) and every
/// `run` and `console` block of the documentation; returns how many ran.
fn run_documented(dirs: &Dirs, venv: &Path, served: &Served) -> anyhow::Result<usize> {
    eprintln_status("the documentation's examples, as written");
    let key = (
        "POSTURE_API_KEY",
        served
            .env
            .iter()
            .find(|(k, _)| k == "KEY")
            .map(|(_, v)| v.clone())
            .unwrap_or_default(),
    );
    let python = output(
        Command::new(venv.join("bin").join("python"))
            .arg(dirs.out.join("python").join("quickstart.py"))
            .env("PYTHONPATH", dirs.out.join("python"))
            .env(key.0, &key.1),
    )
    .context("docs/api.md's Python quick start")?;
    let typescript = output(
        Command::new("node")
            .arg("dist/quickstart.mjs")
            .current_dir(dirs.out.join("typescript"))
            .env(key.0, &key.1),
    )
    .context("docs/api.md's TypeScript quick start")?;
    if !python.contains("Scope.READFINDINGS") || python.lines().count() < 10 {
        bail!("the Python quick start printed:\n{python}");
    }
    if !typescript.lines().any(|l| l.starts_with("critical ")) {
        bail!("the TypeScript quick start printed:\n{typescript}");
    }
    let blocks = doc_examples::all_blocks()?;
    Ok(2 + doc_examples::run::run_documents(&blocks, served)?)
}

/// Runs a suite; its failure names the suite only (the command line would show the keys).
fn succeeds(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("starting {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// Files and bytes under `dir`.
fn tree_size(dir: &Path) -> anyhow::Result<(u64, u64)> {
    let (mut files, mut bytes) = (0, 0);
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            let (f, b) = tree_size(&entry.path())?;
            files += f;
            bytes += b;
        } else {
            files += 1;
            bytes += entry.metadata()?.len();
        }
    }
    Ok((files, bytes))
}
