//! `cargo xtask`: contributor tasks (see `cargo xtask --help`).

mod docs_check;
mod monitoring_check;
mod notices;
mod test;
mod tidy;
mod vendor_docs;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
// The shared modules, at the paths the tasks name them by (`crate::files::...`).
use xtask::{LAB_TASKS, files, pgbouncer, process, servers, setup};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "posture's contributor tasks",
    after_help = "The lab's tasks (xtask/lab, built on first use; `cargo xtask <task> --help`): \
                  openapi, schema, fuzz, console-e2e, clients, scim, demo, gen-data, bench, \
                  chaos, soak."
)]
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
    /// Check the rules of the codebase the compiler does not: module docs, file lengths,
    /// module names, crate layering (also run by `cargo test`).
    Tidy,
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
    /// A task of the lab (`posture-lab`): built and run with the arguments as given.
    #[command(external_subcommand)]
    Lab(Vec<String>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Lab(args) => lab(&args),
        task => setup::ensure(task.name()).and_then(|()| task.run()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            process::eprintln_status(&format!("error: {e:#}"));
            ExitCode::FAILURE
        }
    }
}

/// Runs a task of the lab: `cargo run -p posture-lab -- <task> <args>` in this process's
/// place (on Unix), so Ctrl-C, the exit status and the working directory are the task's
/// as when `cargo xtask` ran it itself (`cargo xtask demo` cleans up before the prompt).
fn lab(args: &[String]) -> anyhow::Result<()> {
    let task = args.first().map(String::as_str).unwrap_or_default();
    if !LAB_TASKS.contains(&task) {
        anyhow::bail!("no task `{task}` (`cargo xtask --help` lists them)");
    }
    let manifest = files::project_root().join("Cargo.toml");
    let mut command = process::cargo();
    command
        .args([
            "run",
            "--quiet",
            "--package",
            "posture-lab",
            "--manifest-path",
        ])
        .arg(&manifest)
        .arg("--")
        .args(args);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        // Returns only if the program could not be started.
        Err(anyhow::Error::new(command.exec()).context("running cargo"))
    }
    #[cfg(not(unix))]
    match command.status()?.code() {
        Some(0) => Ok(()),
        // The lab said what failed; exit as it did.
        Some(code) => std::process::exit(code),
        None => anyhow::bail!("posture-lab was stopped"),
    }
}

impl Task {
    /// The name [`setup::needs`] knows the task by.
    fn name(&self) -> &'static str {
        match self {
            Task::Test { citus: false, .. } => "test",
            Task::Test { citus: true, .. } => "citus",
            Task::VendorDocs => "vendor-docs",
            Task::Tidy | Task::Setup { .. } | Task::Notices { .. } | Task::Lab(_) => "",
        }
    }

    fn run(self) -> anyhow::Result<()> {
        match self {
            Task::Test { citus: false, args } => test::run(&args),
            Task::Test { citus: true, args } => test::run_citus(&args),
            Task::Tidy => tidy::run(),
            Task::Setup { task } => setup::ensure(&task).map(|()| {
                process::eprintln_status(&format!("{task}: everything it needs is here"));
            }),
            Task::Notices { check } => notices::run(check),
            Task::VendorDocs => vendor_docs::run(),
            Task::Lab(args) => lab(&args),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    /// `cargo xtask --help` names every task of the lab a contributor may run.
    #[test]
    fn the_help_names_every_lab_task() {
        let help = super::Cli::command()
            .get_after_help()
            .map(ToString::to_string)
            .unwrap_or_default();
        for task in super::LAB_TASKS.iter().filter(|t| **t != "bench-floor") {
            assert!(
                help.split([' ', ',', '.', ':']).any(|w| w == *task),
                "{task} missing from: {help}"
            );
        }
    }
}
