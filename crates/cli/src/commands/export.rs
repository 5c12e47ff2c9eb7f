//! `posture export`: every finding the query selects, as a stream to stdout; its summary
//! to stderr.

use std::process::ExitCode;

use super::context::{Context, INTERRUPTED};
use crate::{
    export::{self, ExportQuery},
    output::err_line,
};

pub(super) async fn run(cx: &Context, query: &ExportQuery) -> anyhow::Result<ExitCode> {
    let stdout = std::io::BufWriter::with_capacity(256 * 1024, std::io::stdout().lock());
    let report = tokio::select! {
        report = export::export(&cx.api, query, stdout, cx.progress.as_ref()) => report?,
        _ = tokio::signal::ctrl_c() => {
            cx.progress.end();
            err_line("interrupted: the output is incomplete");
            return Ok(ExitCode::from(INTERRUPTED));
        }
    };
    if cx.json {
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
    Ok(ExitCode::SUCCESS)
}
