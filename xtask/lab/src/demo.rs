//! `cargo xtask demo`: the product on one machine, with one command.
//!
//! Starts a throwaway PostgreSQL (or uses `DATABASE_URL`), migrates, creates two customers
//! with a key holding every scope, serves the API on 127.0.0.1:8080, runs `posture-worker`,
//! subscribes a local receiver (which checks each delivery's signature) to the first
//! customer's findings, ingests deterministic demo data through the real `posture-api
//! ingest`, summarises the initial deliveries in one line, and prints the keys, the API
//! reference's URL and ready `curl` lines last, so they stay on screen; each later delivery
//! prints a line. Ctrl-C stops
//! everything it started and removes its data. With `--check` it then runs every printed
//! command as printed (`demo_check`) and stops.

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    sync::Arc,
};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use clap::Args;

use crate::{
    binaries::{
        Guard, api_json, build_binaries, create_customer, every_scope, ingest_demo_data, issue_key,
        rand_bytes, wait_until_listening,
    },
    demo_data::CustomerSpec,
    demo_receiver,
    files::scratch_dir,
    process::eprintln_status,
};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Port of the API.
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Findings of the first customer (the second gets a third of it).
    #[arg(long, default_value_t = 8000)]
    findings: usize,
    /// Identities of the first customer (the second gets a third of it).
    #[arg(long, default_value_t = 3000)]
    identities: usize,
    /// Run every command the demo prints, as printed, then stop (CI; a free port is used).
    #[arg(long)]
    check: bool,
}

pub fn run_demo(args: &DemoArgs) -> anyhow::Result<()> {
    let bin = build_binaries()?;
    let postgres = match std::env::var("DATABASE_URL") {
        Ok(_) => None,
        Err(_) => Some(crate::servers::postgres("demo-postgres", "")?),
    };
    let database_url = match &postgres {
        Some(pg) => pg.url.clone(),
        None => std::env::var("DATABASE_URL")?,
    };
    let env = [("DATABASE_URL", database_url.as_str())];
    eprintln_status("migrating the demo's database (posture-api migrate)");
    api_json(&bin, &env, &["migrate"])?;
    eprintln_status("creating two customers, each with a key holding every scope");

    let customers = demo_customers(&bin, &env, args)?;

    // The API, the worker, and a receiver subscribed to the first customer's findings.
    let secret_key = base64::engine::general_purpose::STANDARD.encode(rand_bytes()?);
    let port = if args.check {
        crate::servers::free_port()?
    } else {
        args.port
    };
    let bind = format!("127.0.0.1:{port}");
    let log = std::env::var("POSTURE_LOG").unwrap_or_else(|_| "warn".into());
    let common = |command: &mut Command| {
        command
            .env("DATABASE_URL", &database_url)
            .env("POSTURE_SECRET_KEY", &secret_key)
            .env("POSTURE_WEBHOOK_ALLOW_PRIVATE", "true")
            .env("POSTURE_LOG", &log)
            .stdin(Stdio::null());
    };
    eprintln_status(&format!(
        "starting posture-api serve on {bind}, posture-worker and a webhook receiver"
    ));
    let mut serve = Command::new(bin.join("posture-api"));
    serve.arg("serve").env("POSTURE_BIND", &bind);
    common(&mut serve);
    let mut children = Guard(vec![serve.spawn().context("starting posture-api serve")?]);
    wait_until_listening(&bind)?;
    let base = format!("http://{bind}");
    let receiver: demo_receiver::Shared = Arc::default();
    let hook = demo_receiver::start(receiver.clone())?;
    let signing_secret = demo_receiver::subscribe(&base, &customers[0].2, &hook)?;
    if let Ok(mut slot) = receiver.secret.write() {
        *slot = Some(signing_secret);
    }
    let mut worker = Command::new(bin.join("posture-worker"));
    common(&mut worker);
    children
        .0
        .push(worker.spawn().context("starting posture-worker")?);

    // One analyzer pass per customer, through the real ingest command.
    let data_dir = scratch_dir("demo-data")?;
    let queued = ingest_passes(&bin, &env, &customers, &data_dir)?;
    summarise_initial_deliveries(&receiver, queued);

    let shown = Shown {
        base: &base,
        hook: &hook,
        bin: &bin,
        data_dir: &data_dir,
        database_url: postgres.as_ref().map(|_| database_url.as_str()),
    };
    let text = shown.instructions(&customers);
    print_block(&text);

    let status = if args.check {
        // A fresh directory each time: the printed `posture sync` makes `posture.db` there,
        // which holds one customer, and this run's customers are new.
        let cwd = scratch_dir("demo-check")?;
        std::fs::remove_dir_all(&cwd)?;
        let checked = crate::demo_check::run_printed(&text, &scratch_dir("demo-check")?);
        drop(children);
        drop(postgres);
        let _ = std::fs::remove_dir_all(&data_dir);
        return checked.map(|_| ());
    } else {
        wait_for_ctrl_c(&mut children.0[0])?
    };
    drop(children);
    drop(postgres);
    let _ = std::fs::remove_dir_all(&data_dir);
    if let Some(status) = status
        && !status.success()
    {
        bail!("posture-api serve exited with {status}");
    }
    eprintln_status("demo stopped");
    Ok(())
}

/// The demo's two customers, each with a key holding every scope.
fn demo_customers(
    bin: &Path,
    env: &[(&str, &str)],
    args: &DemoArgs,
) -> anyhow::Result<Vec<(CustomerSpec, String, String)>> {
    let specs = [
        CustomerSpec {
            name: "Contoso Group".into(),
            tenants: 3,
            identities: args.identities,
            findings: args.findings,
            upr_days: 60,
            seed: 1,
        },
        CustomerSpec {
            name: "Fabrikam Inc".into(),
            tenants: 2,
            identities: args.identities / 3,
            findings: args.findings / 3,
            upr_days: 60,
            seed: 2,
        },
    ];
    let mut customers = Vec::new();
    for spec in specs {
        let id = create_customer(bin, env, &spec.name)?;
        let key = issue_key(bin, env, &id, "demo", &every_scope())?;
        customers.push((spec, id, key));
    }
    Ok(customers)
}

/// One analyzer pass per customer, written to `data_dir` and ingested through the real
/// `posture-api ingest`; returns the deliveries the first customer's pass queued.
fn ingest_passes(
    bin: &Path,
    env: &[(&str, &str)],
    customers: &[(CustomerSpec, String, String)],
    data_dir: &Path,
) -> anyhow::Result<u64> {
    let mut queued = 0;
    for (index, (spec, id, _)) in customers.iter().enumerate() {
        let file = data_dir.join(format!("{}.jsonl", spec.seed));
        eprintln_status(&format!(
            "{}: writing and ingesting an analyzer pass ({} findings) through posture-api ingest",
            spec.name, spec.findings
        ));
        let pass = ingest_demo_data(bin, env, id, spec, &file)?;
        eprintln_status(&format!(
            "{}: {} identities, {} findings, {} UPR scores ingested; {} webhook deliveries queued",
            spec.name,
            pass["identities"],
            pass["findings"],
            pass["uprScores"],
            pass["deliveriesQueued"]
        ));
        if index == 0 {
            queued = pass["deliveriesQueued"].as_u64().unwrap_or(0);
        }
    }
    Ok(queued)
}

/// What the demo prints: where it runs and the commands to try against it.
struct Shown<'a> {
    base: &'a str,
    hook: &'a str,
    bin: &'a Path,
    data_dir: &'a Path,
    /// The throwaway server's URL (it holds no secret); `None` when the user's
    /// `DATABASE_URL` is used, which is not printed back.
    database_url: Option<&'a str>,
}

impl Shown<'_> {
    fn instructions(&self, customers: &[(CustomerSpec, String, String)]) -> String {
        let Shown {
            base,
            hook,
            bin,
            data_dir,
            ..
        } = *self;
        let mut text =
            format!("\nposture demo is running at {base} (Ctrl-C stops it and removes its data)\n");
        text.push_str(&format!(
        "posture-worker delivers {}'s new findings to the receiver at {hook}; each later delivery prints a line.\n",
        customers[0].0.name
    ));
        for (spec, _, key) in customers {
            text.push_str(&format!(
                "\n{}: key with every scope\n  export KEY={key}\n",
                spec.name
            ));
        }
        text.push_str(&format!(
            "\nAPI reference (browse and try every route): {base}/api/v1/docs\n"
        ));
        let (first, first_id, first_key) = &customers[0];
        let export_url = match self.database_url {
            Some(url) => format!("export DATABASE_URL='{url}'"),
            None => "# DATABASE_URL: the one you set".to_owned(),
        };
        text.push_str(&format!(
            "\nOperator commands against the demo's database (posture-api, docs/operations.md):\n  \
         {export_url}\n  \
         {api} ingest --customer {first_id} {pass}   # {name}'s pass again\n",
            api = bin.join("posture-api").display(),
            pass = data_dir.join(format!("{}.jsonl", first.seed)).display(),
            name = first.name,
        ));
        text.push_str(&format!(
            "\nThe customers' CLI, posture (built with the service, docs/cli.md), as {}:\n  \
         export POSTURE_URL={base} POSTURE_API_KEY={first_key}\n  \
         {cli} whoami\n  {cli} sync --into posture.db\n",
            first.name,
            cli = bin.join("posture").display(),
        ));
        text.push_str("\nTry (with KEY set to one of the keys above):\n");
        for path in [
            "/api/v1/keys/current",
            "/api/v1/tenants",
            "/api/v1/identities?limit=3",
            "/api/v1/findings?severity=critical,high&status=open&limit=5",
            "/api/v1/roles?limit=2",
            "/api/v1/upr",
            "/api/v1/upr/principals?minScore=80&limit=5",
            "/api/v1/upr/trend?days=14",
            "/api/v1/webhooks",
        ] {
            text.push_str(&format!(
                "  curl -s -H \"Authorization: Bearer $KEY\" '{base}{path}'\n"
            ));
        }
        text.push_str(&format!(
            "  curl -s '{base}/api/v1/openapi.json' | head -c 300\n\n"
        ));
        text
    }
}

/// Waits (up to a minute) for the deliveries of the first customer's initial pass and prints
/// one line for all of them; later deliveries print one line each.
fn summarise_initial_deliveries(receiver: &demo_receiver::Receiver, queued: u64) {
    use std::sync::atomic::Ordering;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while receiver.received.load(Ordering::Relaxed) < queued && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let received = receiver.received.load(Ordering::Relaxed);
    let verified = receiver.verified.load(Ordering::Relaxed);
    let findings = receiver.findings.load(Ordering::Relaxed);
    let pending = if received < queued {
        format!(" ({} still on their way)", queued - received)
    } else {
        String::new()
    };
    eprintln_status(&format!(
        "webhook receiver: {received} of {queued} initial deliveries ({findings} findings), \
         {verified} with a verified signature{pending}"
    ));
    receiver.verbose.store(true, Ordering::Relaxed);
}

fn print_block(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// Waits for Ctrl-C (or the server exiting on its own); returns the server's status if it
/// exited by itself.
fn wait_for_ctrl_c(server: &mut Child) -> anyhow::Result<Option<std::process::ExitStatus>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => return Ok(None),
                () = tokio::time::sleep(std::time::Duration::from_millis(200)) => {
                    if let Some(status) = server.try_wait()? {
                        return Ok(Some(status));
                    }
                }
            }
        }
    })
}
