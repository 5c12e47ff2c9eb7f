//! `posture`: parses the command line and runs it.

use std::process::ExitCode;

use clap::Parser as _;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    posture_cli::commands::run(posture_cli::args::Cli::parse()).await
}
