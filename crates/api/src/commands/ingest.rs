//! `posture-api ingest --customer ID [FILE|-]`: one analyzer pass.
//!
//! Lines are read, numbered and parsed as they stream into the pass's transaction, so a
//! large file is never held in memory. Parsing runs on its own thread a bounded queue ahead
//! of the pass, so it overlaps with the database writes instead of waiting for them. On a
//! terminal, a progress bar follows the bytes read.

use std::{
    fs::File,
    io::{BufRead, BufReader, IsTerminal, Read},
    path::Path,
    sync::mpsc,
};

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use posture_domain::{
    ingest::{IngestError, MAX_LINE_BYTES, ParsedLine, numbered_items},
    ports::IngestRepository,
};
use serde_json::json;

use super::operator::{customer_scope, store};
use crate::{
    cli::IngestArgs,
    output::{emit, warn},
};

/// Counts the bytes read, for the progress bar.
struct Progress<R> {
    inner: R,
    bar: Option<ProgressBar>,
}

impl<R: Read> Read for Progress<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(bar) = &self.bar {
            bar.inc(n as u64);
        }
        Ok(n)
    }
}

/// The lines of `reader`, each read with a bound: a line longer than [`MAX_LINE_BYTES`] is an
/// error after at most that many bytes were read (a multi-gigabyte line without a newline is
/// never held in memory), and reading stops there.
struct BoundedLines<R> {
    reader: R,
    done: bool,
}

impl<R: BufRead> Iterator for BoundedLines<R> {
    type Item = std::io::Result<String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut line = Vec::new();
        let limit = MAX_LINE_BYTES as u64 + 2; // room for "\r\n"
        let read = match (&mut self.reader).take(limit).read_until(b'\n', &mut line) {
            Ok(0) => return None,
            Ok(read) => read,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        if line.ends_with(b"\n") {
            line.pop();
            if line.ends_with(b"\r") {
                line.pop();
            }
        } else if read as u64 == limit {
            self.done = true;
            return Some(Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the line is longer than {MAX_LINE_BYTES} bytes"),
            )));
        }
        Some(String::from_utf8(line).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "the line is not UTF-8")
        }))
    }
}

/// Parsed records queued ahead of the pass: more than one write batch, so the next batch is
/// parsed while the current one is written.
const PARSE_AHEAD: usize = 8_192;

/// Reads and parses `reader` on a thread of its own; the items arrive in order. When the pass
/// stops early (a rejected line, a database error) the receiver is dropped and the thread
/// stops at its next item.
fn parse_ahead(
    reader: impl BufRead + Send + 'static,
) -> impl Iterator<Item = Result<ParsedLine, IngestError>> {
    let (sender, receiver) = mpsc::sync_channel(PARSE_AHEAD);
    std::thread::spawn(move || {
        let lines = BoundedLines {
            reader,
            done: false,
        };
        for item in numbered_items(lines) {
            if sender.send(item).is_err() {
                break;
            }
        }
    });
    receiver.into_iter()
}

fn open(file: Option<&Path>) -> anyhow::Result<(Box<dyn Read + Send>, Option<u64>)> {
    match file {
        None => Ok((Box::new(std::io::stdin()), None)),
        Some(path) if path == Path::new("-") => Ok((Box::new(std::io::stdin()), None)),
        Some(path) => {
            let file =
                File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
            let size = file.metadata().ok().map(|m| m.len());
            Ok((Box::new(file), size))
        }
    }
}

pub async fn run(args: IngestArgs, json: bool) -> anyhow::Result<()> {
    let scope = customer_scope(&args.customer)?;
    let (input, size) = open(args.file.as_deref())?;
    let bar = match size {
        Some(size) if size > 1 << 20 && std::io::stderr().is_terminal() => {
            let bar = ProgressBar::new(size);
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:40} {binary_bytes}/{binary_total_bytes} {elapsed} eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            Some(bar)
        }
        _ => None,
    };
    let reader = BufReader::with_capacity(
        1 << 16,
        Progress {
            inner: input,
            bar: bar.clone(),
        },
    );
    let mut items = parse_ahead(reader);
    let result = store(&args.database)?.run_pass(scope, &mut items).await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let summary = result.map_err(|e| match e {
        IngestError::Line { .. } | IngestError::Input { .. } => {
            anyhow::Error::new(e).context("the pass was rejected and nothing was changed")
        }
        IngestError::Store(posture_domain::Error::Invalid { reason, .. }) => {
            anyhow::anyhow!("{reason}")
        }
        IngestError::Store(e) => {
            anyhow::Error::new(e).context("the pass failed and nothing was changed")
        }
    })?;
    let c = &summary.counts;
    let value = summary_json(&summary, scope.customer_id());
    if c.unknown_fields > 0 {
        warn(&format!(
            "{} fields posture does not know were ignored ({}); the analyzer may be newer than \
             posture",
            c.unknown_fields,
            summary.unknown_field_names.join(", ")
        ));
    }
    let seconds = (summary.finished_at - summary.started_at).num_milliseconds() as f64 / 1000.0;
    emit(json, &value, || {
        format!(
            "pass {} committed in {seconds:.1} s: {} tenants, {} identities, {} findings ({} new), \
             {} role recommendations, {} UPR scores; {} events, {} webhook deliveries queued",
            summary.pass_id,
            c.tenants,
            c.identities,
            c.findings,
            c.new_findings,
            c.role_recommendations,
            c.upr_scores,
            c.events,
            c.deliveries
        )
    })
}

/// The pass's summary as `--json` prints it.
fn summary_json(
    summary: &posture_domain::ingest::PassSummary,
    customer: posture_domain::CustomerId,
) -> serde_json::Value {
    let c = &summary.counts;
    json!({
        "id": summary.pass_id.to_string(),
        "customerId": customer.to_string(),
        "startedAt": summary.started_at,
        "finishedAt": summary.finished_at,
        "tenants": c.tenants,
        "identities": c.identities,
        "findings": c.findings,
        "newFindings": c.new_findings,
        "roleRecommendations": c.role_recommendations,
        "uprScores": c.upr_scores,
        "events": c.events,
        "deliveriesQueued": c.deliveries,
        "unknownFields": c.unknown_fields,
        "unknownFieldNames": summary.unknown_field_names,
        "fanOutMs": summary.fan_out.as_millis() as u64,
    })
}

#[cfg(test)]
mod tests {
    use std::io::{Cursor, Read as _};

    use super::*;

    fn lines(input: impl BufRead) -> Vec<std::io::Result<String>> {
        BoundedLines {
            reader: input,
            done: false,
        }
        .collect()
    }

    #[test]
    fn lines_end_at_lf_or_crlf_and_the_last_needs_no_newline() {
        let read: Vec<String> = lines(Cursor::new("a\r\nb\n\nc"))
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(read, vec!["a", "b", "", "c"]);
    }

    #[test]
    fn an_endless_line_is_refused_after_the_bound_without_reading_it_all() {
        let endless = std::io::repeat(b'x').take(u64::MAX);
        let mut read = lines(BufReader::new(endless)).into_iter();
        let error = read.next().unwrap().unwrap_err();
        assert!(error.to_string().contains("longer than"), "{error}");
        assert!(read.next().is_none(), "reading stops at the refused line");
    }

    #[test]
    fn a_line_at_the_bound_is_read() {
        let line = "x".repeat(MAX_LINE_BYTES);
        let read = lines(Cursor::new(format!("{line}\r\nnext\n")));
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].as_ref().unwrap().len(), MAX_LINE_BYTES);
    }
}
