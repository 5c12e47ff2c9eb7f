//! `posture-api`: parses the command line, sets up logging, runs the command.

use std::process::ExitCode;

use clap::Parser as _;
use posture_api::{cli::Cli, commands};
use posture_startup::telemetry;

/// mimalloc: the server allocates and frees many short-lived buffers per request, which it
/// serves markedly faster than the system allocator (see docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(&cli.log);
    match commands::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
