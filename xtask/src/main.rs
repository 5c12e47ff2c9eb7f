//! `cargo xtask`: contributor tasks (see `cargo xtask --help`).

mod bench;
mod binaries;
mod chaos;
mod citus;
mod clients;
mod console_e2e;
mod demo;
mod demo_check;
mod demo_data;
mod demo_receiver;
mod doc_examples;
mod docs_check;
mod docs_page_check;
mod files;
mod fuzz;
mod gen_data;
mod monitoring_check;
mod notices;
mod openapi;
mod pgbouncer;
mod process;
mod receivers;
mod schema;
mod scim_check;
mod servers;
mod setup;
mod test;
mod tidy;
mod vendor_docs;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "posture's contributor tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Run every test against throwaway PostgreSQL and Redis (or TEST_DATABASE_URL /
    /// TEST_REDIS_URL). Arguments after `--` go to `cargo test`.
    ///
    /// `--citus`: the integration suites of the store, the API and the worker against a
    /// Citus cluster on loopback instead (a coordinator and two workers; Citus is built
    /// from CITUS_SOURCE when it is not installed).
    Test {
        #[arg(long)]
        citus: bool,
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Regenerate docs/openapi.json from the route table (`--check`: fail if stale).
    Openapi {
        #[arg(long)]
        check: bool,
    },
    /// Regenerate crates/store-postgres/src/schema.rs from the migrations (`--check`: fail if
    /// stale). Starts a throwaway PostgreSQL.
    Schema {
        #[arg(long)]
        check: bool,
    },
    /// Check the rules of the codebase the compiler does not: module docs, file lengths,
    /// module names, crate layering (also run by `cargo test`).
    Tidy,
    /// Fuzz the served contract with schemathesis (installed into target/fuzz-venv).
    Fuzz(fuzz::FuzzArgs),
    /// The customer console in headless Chromium against a real OpenID Connect provider
    /// (node-oidc-provider); screenshots in target/console-e2e/screenshots.
    ConsoleE2e,
    /// What an API consumer gets, against a running posture: the contract linted
    /// (Spectral), the Python and TypeScript clients generated and their suites run, the
    /// API reference page checked in headless Chromium (docs/clients.md).
    Clients,
    /// SCIM conformance alone: scim2-tester against `/scim/v2` of a served posture (also
    /// run by `clients`; docs/scim.md).
    Scim,
    /// Start the product with demo data on 127.0.0.1:8080 until Ctrl-C.
    Demo(demo::DemoArgs),
    /// Write demo data at any scale as JSON Lines files (one per customer).
    GenData(gen_data::GenDataArgs),
    /// Measure throughput and latency end to end (release build, wrk, pgbench).
    Bench(bench::BenchArgs),
    /// Inject faults while traffic flows and measure what posture promises (PostgreSQL
    /// and Redis outages, killed workers, failing receivers, lost LISTEN, SIGTERM).
    Chaos(chaos::ChaosArgs),
    /// Mixed traffic for N minutes, failing if memory, descriptors, connections or queues
    /// grow.
    Soak(chaos::soak::SoakArgs),
    /// Install what a task needs from the machine (`ci`: everything `.ci/run` runs). Every
    /// task does this for itself first; this runs it alone.
    Setup {
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(setup::TASKS))]
        task: String,
    },
    /// Render THIRD-PARTY-NOTICES.md with cargo-about (`--check`: fail if stale or a license
    /// is not accepted by about.toml).
    Notices {
        #[arg(long)]
        check: bool,
    },
    /// Refresh the API reference page's script vendored into posture-api (npm, from
    /// xtask/docs-page/package-lock.json).
    VendorDocs,
    /// The database client's floor of `bench` (run by it from a release build).
    #[command(hide = true)]
    BenchFloor(bench::FloorArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = setup::ensure(cli.task.name()).and_then(|()| cli.task.run());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            process::eprintln_status(&format!("error: {e:#}"));
            ExitCode::FAILURE
        }
    }
}

impl Task {
    /// The name [`setup::needs`] knows the task by.
    fn name(&self) -> &'static str {
        match self {
            Task::Test { citus: false, .. } => "test",
            Task::Test { citus: true, .. } => "citus",
            Task::Fuzz(_) => "fuzz",
            Task::ConsoleE2e => "console-e2e",
            Task::Clients => "clients",
            Task::Scim => "scim",
            Task::Demo(_) => "demo",
            Task::Bench(args) if args.citus => "bench-citus",
            Task::Bench(_) => "bench",
            Task::Chaos(_) => "chaos",
            Task::Soak(_) => "soak",
            Task::Schema { .. } => "schema",
            Task::Openapi { .. }
            | Task::Tidy
            | Task::GenData(_)
            | Task::Setup { .. }
            | Task::Notices { .. } => "",
            Task::VendorDocs => "vendor-docs",
            Task::BenchFloor(_) => "",
        }
    }

    fn run(self) -> anyhow::Result<()> {
        match self {
            Task::Test { citus: false, args } => test::run(&args),
            Task::Test { citus: true, args } => test::run_citus(&args),
            Task::Openapi { check } => openapi::run(check),
            Task::Schema { check } => schema::run(check),
            Task::Tidy => tidy::run(),
            Task::Fuzz(args) => fuzz::run_fuzz(&args),
            Task::ConsoleE2e => console_e2e::run_console_e2e(),
            Task::Demo(args) => demo::run_demo(&args),
            Task::Clients => clients::run_clients(),
            Task::Scim => scim_check::run_alone(),
            Task::GenData(args) => gen_data::run(&args),
            Task::Bench(args) => bench::run_bench(&args),
            Task::Chaos(args) => chaos::run(&args),
            Task::Soak(args) => chaos::soak::run_soak(&args),
            Task::Setup { task } => setup::ensure(&task).map(|()| {
                process::eprintln_status(&format!("{task}: everything it needs is here"));
            }),
            Task::Notices { check } => notices::run(check),
            Task::VendorDocs => vendor_docs::run(),
            Task::BenchFloor(args) => bench::run_floor(&args),
        }
    }
}
