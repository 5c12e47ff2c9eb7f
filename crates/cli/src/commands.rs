//! Runs a parsed command line: text for people, `--json` for scripts, errors in words.

use std::{io::Write as _, process::ExitCode, sync::Arc};

use clap::CommandFactory as _;

use crate::{
    args::{Cli, Command, FindingsCommand},
    client::{Api, Notices, Retries, Target},
    export::{self, ExportQuery},
    listen::{self, ListenOptions},
    output::{err_line, out, out_line},
    progress::{Bar, Progress, Quiet},
    sync, triage, whoami,
};

/// Exit status of a command stopped by Ctrl-C (128 + SIGINT, as shells report it).
const INTERRUPTED: u8 = 130;

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
    let json = cli.json;
    if let Command::Completion { shell } = cli.command {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "posture", &mut script);
        let _ = std::io::stdout().lock().write_all(&script);
        return Ok(ExitCode::SUCCESS);
    }
    let target = Target::from_env()?;
    // A bar on a terminal; with --json, nothing but the messages.
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
    let api = Api::new(target, Retries::default(), notices)?;
    match cli.command {
        Command::Whoami => {
            let me = whoami::fetch(&api).await?;
            if json {
                out_line(&me.raw.to_string());
            } else {
                out(&whoami::render(&me.key, chrono::Utc::now()));
            }
        }
        Command::Sync { into } => {
            let shown = into.display().to_string();
            let (stop, stopped) = tokio::sync::watch::channel(false);
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    let _ = stop.send(true);
                }
            });
            let options = sync::SyncOptions {
                stop: stopped,
                ..Default::default()
            };
            let report = match sync::sync(&api, into, progress.as_ref(), &options).await {
                Ok(report) => report,
                Err(e @ sync::SyncError::Interrupted { .. }) => {
                    err_line(&format!("posture: {e} ({shown})"));
                    return Ok(ExitCode::from(INTERRUPTED));
                }
                Err(e) => return Err(e.into()),
            };
            if json {
                out_line(&serde_json::to_string(&report)?);
            } else {
                let lists: Vec<String> = report
                    .lists
                    .iter()
                    .map(|l| format!("{} {}+{}", l.list, l.new, l.changed))
                    .collect();
                let skipped = if report.skipped.is_empty() {
                    String::new()
                } else {
                    format!("; skipped (no scope): {}", report.skipped.join(", "))
                };
                out_line(&format!(
                    "synced {} into {shown}: {} new, {} changed ({}) in {:.1} s{skipped}",
                    report.customer,
                    report.new_rows(),
                    report.changed_rows(),
                    lists.join(", "),
                    report.seconds
                ));
            }
        }
        Command::Export {
            format,
            modified_since,
            severity,
            status,
            finding_type,
            tenant,
            triage_state,
        } => {
            let query = ExportQuery {
                format: format.as_str().to_owned(),
                modified_since,
                severity,
                status,
                finding_type,
                tenant,
                triage_state,
            };
            let stdout = std::io::BufWriter::with_capacity(256 * 1024, std::io::stdout().lock());
            let report = tokio::select! {
                report = export::export(&api, &query, stdout, progress.as_ref()) => report?,
                _ = tokio::signal::ctrl_c() => {
                    progress.end();
                    err_line("interrupted: the output is incomplete");
                    return Ok(ExitCode::from(INTERRUPTED));
                }
            };
            if json {
                err_line(&serde_json::to_string(&report)?);
            } else {
                let next = report
                    .synced_through
                    .as_deref()
                    .map(|t| format!("; for what changes next: --modified-since {t}"))
                    .unwrap_or_default();
                err_line(&format!(
                    "exported {} findings ({} bytes; {} on the wire, {}) in {:.1} s{next}",
                    report.lines, report.bytes, report.wire_bytes, report.encoding, report.seconds
                ));
            }
        }
        Command::Listen {
            forward_to,
            types,
            secret,
            after,
        } => {
            let me = whoami::fetch(&api).await?;
            let (secret, given) = match secret {
                Some(secret) => (secret, true),
                None => (listen::new_secret()?, false),
            };
            let options = ListenOptions {
                forward_to,
                types,
                secret,
                since: if after.is_none() {
                    me.server_time
                } else {
                    None
                },
                after,
                receiver_retries: Retries::default(),
            };
            if !given {
                err_line(&format!(
                    "signing with {} (give it to your receiver; --secret keeps one across runs)",
                    options.secret
                ));
            }
            err_line(&format!(
                "forwarding {}'s events to {} (Ctrl-C to stop)",
                me.key.customer.name, options.forward_to
            ));
            let mut shown = |f: &listen::Forwarded| {
                if json {
                    if let Ok(line) = serde_json::to_string(f) {
                        out_line(&line);
                    }
                } else {
                    out_line(&listen::render(f, chrono::Utc::now()));
                }
            };
            tokio::select! {
                ended = listen::listen(&api, &options, &mut shown) => ended?,
                _ = tokio::signal::ctrl_c() => return Ok(ExitCode::from(INTERRUPTED)),
            }
        }
        Command::Findings {
            command: FindingsCommand::Triage(args),
        } => {
            let wanted = args.triage();
            let mut said = 0;
            let mut shown = |outcome: &triage::Outcome| {
                said += 1;
                if json {
                    out_line(&outcome.raw.to_string());
                } else {
                    out_line(&triage::render(outcome, &wanted));
                }
            };
            let missed = triage::triage(&api, &args.ids, &wanted, &mut shown).await?;
            if missed > 0 {
                err_line(&format!(
                    "{missed} of {said} findings not written (see above)"
                ));
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Completion { .. } => {}
    }
    Ok(ExitCode::SUCCESS)
}
