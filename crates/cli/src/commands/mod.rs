//! Runs a parsed command line: text for people, `--json` for scripts, errors in words. One
//! file per command; this one parses nothing and only sends each command to its file.

mod context;
mod export;
mod listen;
mod sync;
mod triage;
mod whoami;

use std::{io::Write as _, process::ExitCode, sync::Arc};

use clap::CommandFactory as _;

use context::Context;

use crate::{
    args::{Cli, Command, FindingsCommand},
    client::{Api, Notices, Retries, Target},
    output::err_line,
    progress::{Bar, Progress, Quiet},
};

/// Runs the command; prints its errors; the process's exit status.
pub async fn run(cli: Cli) -> ExitCode {
    match execute(cli).await {
        Ok(code) => code,
        Err(e) => {
            err_line(&format!("posture: {e:#}"));
            ExitCode::FAILURE
        }
    }
}

async fn execute(cli: Cli) -> anyhow::Result<ExitCode> {
    if let Command::Completion { shell } = cli.command {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "posture", &mut script);
        let _ = std::io::stdout().lock().write_all(&script);
        return Ok(ExitCode::SUCCESS);
    }
    let cx = context(cli.json)?;
    match cli.command {
        Command::Whoami => whoami::run(&cx).await,
        Command::Sync { into } => sync::run(&cx, into).await,
        Command::Export {
            format,
            modified_since,
            severity,
            status,
            finding_type,
            tenant,
            triage_state,
        } => {
            let query = crate::export::ExportQuery {
                format: format.as_str().to_owned(),
                modified_since,
                severity,
                status,
                finding_type,
                tenant,
                triage_state,
            };
            export::run(&cx, &query).await
        }
        Command::Listen {
            forward_to,
            types,
            secret,
            after,
        } => listen::run(&cx, forward_to, types, secret, after).await,
        Command::Findings {
            command: FindingsCommand::Triage(args),
        } => triage::run(&cx, &args).await,
        Command::Completion { .. } => Ok(ExitCode::SUCCESS),
    }
}

/// The client of the target the environment names, and how progress is shown.
fn context(json: bool) -> anyhow::Result<Context> {
    let target = Target::from_env()?;
    let progress: Arc<dyn Progress> = if json {
        Arc::new(Quiet)
    } else {
        Arc::new(Bar::new())
    };
    let said = progress.clone();
    let notices: Notices = Arc::new(move |text: &str| {
        if json {
            err_line(text);
        } else {
            said.say(text);
        }
    });
    Ok(Context {
        api: Api::new(target, Retries::default(), notices)?,
        progress,
        json,
    })
}
