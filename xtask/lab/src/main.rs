//! `posture-lab`: the contributor tasks that run posture itself — the contract rendered from
//! the route table, the schema, the demo, the clients and fuzzers at its seams, benchmarks,
//! chaos and soak. `cargo xtask <task>` builds and runs it (`xtask::LAB_TASKS`), so the
//! light tasks (`tidy`, `test`, `setup`, `notices`) never compile the server.

mod bench;
mod binaries;
mod chaos;
mod clients;
mod console_e2e;
mod demo;
mod demo_check;
mod demo_data;
mod demo_receiver;
mod doc_examples;
mod docs_page_check;
mod fuzz;
mod gen_data;
mod openapi;
mod receivers;
mod schema;
mod scim_check;
mod suite_credentials;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
// The modules shared with `cargo xtask`, at the paths the tasks name them by.
use xtask::{files, process, servers, setup};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "posture's lab: the contributor tasks that run posture"
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
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
            Task::Openapi { .. } | Task::GenData(_) | Task::BenchFloor(_) => "",
        }
    }

    fn run(self) -> anyhow::Result<()> {
        match self {
            Task::Openapi { check } => openapi::run(check),
            Task::Schema { check } => schema::run(check),
            Task::Fuzz(args) => fuzz::run_fuzz(&args),
            Task::ConsoleE2e => console_e2e::run_console_e2e(),
            Task::Demo(args) => demo::run_demo(&args),
            Task::Clients => clients::run_clients(),
            Task::Scim => scim_check::run_alone(),
            Task::GenData(args) => gen_data::run(&args),
            Task::Bench(args) => bench::run_bench(&args),
            Task::Chaos(args) => chaos::run(&args),
            Task::Soak(args) => chaos::soak::run_soak(&args),
            Task::BenchFloor(args) => bench::run_floor(&args),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    /// `cargo xtask` hands over exactly the tasks the lab has.
    #[test]
    fn xtask_hands_over_exactly_the_lab_s_tasks() {
        let command = super::Cli::command();
        let mut ours: Vec<&str> = command.get_subcommands().map(|c| c.get_name()).collect();
        let mut handed: Vec<&str> = xtask::LAB_TASKS.to_vec();
        ours.sort_unstable();
        handed.sort_unstable();
        assert_eq!(ours, handed);
    }
}
