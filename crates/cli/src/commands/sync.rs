//! `posture sync`: the customer's data into a SQLite file, then what changed since.

use std::{path::PathBuf, process::ExitCode};

use super::context::{Context, INTERRUPTED};
use crate::{
    output::{err_line, out_line},
    sync::{self, SyncError, SyncOptions, SyncReport},
};

pub(super) async fn run(cx: &Context, into: PathBuf) -> anyhow::Result<ExitCode> {
    let shown = into.display().to_string();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stop.send(true);
        }
    });
    let options = SyncOptions {
        stop: stopped,
        ..Default::default()
    };
    let report = match sync::sync(&cx.api, into, cx.progress.as_ref(), &options).await {
        Ok(report) => report,
        Err(e @ SyncError::Interrupted { .. }) => {
            err_line(&format!("posture: {e} ({shown})"));
            return Ok(ExitCode::from(INTERRUPTED));
        }
        Err(e) => return Err(e.into()),
    };
    if cx.json {
        out_line(&serde_json::to_string(&report)?);
    } else {
        out_line(&summary(&report, &shown));
    }
    Ok(ExitCode::SUCCESS)
}

/// The line a person reads after a sync into `shown`.
fn summary(report: &SyncReport, shown: &str) -> String {
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
    format!(
        "synced {} into {shown}: {} new, {} changed ({}) in {:.1} s{skipped}",
        report.customer,
        report.new_rows(),
        report.changed_rows(),
        lists.join(", "),
        report.seconds
    )
}
