//! `posture export`: `GET /api/v1/findings/export` to a writer, compressed on the wire when
//! the service offers it (zstd, else gzip), written as the API serves it uncompressed.

use std::io::Write;

use reqwest::header::{ACCEPT_ENCODING, CONTENT_ENCODING, HeaderMap, HeaderValue};
use serde::Serialize;

use crate::{
    client::{Api, ApiError, describe},
    progress::Progress,
};

/// The filters of an export, as the API names them.
#[derive(Clone, Debug, Default)]
pub struct ExportQuery {
    pub format: String,
    pub modified_since: Option<String>,
    pub severity: Option<String>,
    pub status: Option<String>,
    pub finding_type: Option<String>,
    pub tenant: Option<String>,
    pub triage_state: Option<String>,
}

impl ExportQuery {
    fn pairs(&self) -> Vec<(&str, &str)> {
        let mut pairs = vec![("format", self.format.as_str())];
        for (name, value) in [
            ("modifiedSince", &self.modified_since),
            ("severity", &self.severity),
            ("status", &self.status),
            ("findingType", &self.finding_type),
            ("tenant", &self.tenant),
            ("triageState", &self.triage_state),
        ] {
            if let Some(value) = value {
                pairs.push((name, value.as_str()));
            }
        }
        pairs
    }
}

/// What an export wrote.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportReport {
    pub lines: u64,
    pub bytes: u64,
    /// Bytes as they crossed the network.
    pub wire_bytes: u64,
    /// `Content-Encoding` of the answer (`identity` when none).
    pub encoding: String,
    /// Send it as `--modified-since` next time for what changed since.
    pub synced_through: Option<String>,
    pub seconds: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("the export was cut after {lines} of {total} lines ({cause}); run it again")]
    Cut {
        lines: u64,
        total: String,
        cause: String,
    },
    #[error("could not write the export: {0}")]
    Write(std::io::Error),
    #[error("the service answered with an encoding this CLI did not ask for: {0}")]
    Encoding(String),
}

/// Counts the lines and bytes written through it.
struct Counting<W> {
    inner: W,
    lines: u64,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Where decoded bytes go, by `Content-Encoding`.
enum Sink<W: Write> {
    Identity(Counting<W>),
    Gzip(Box<flate2::write::GzDecoder<Counting<W>>>),
    Zstd(Box<zstd::stream::write::Decoder<'static, Counting<W>>>),
}

impl<W: Write> Sink<W> {
    fn new(encoding: &str, out: W) -> Result<Self, ExportError> {
        let counting = Counting {
            inner: out,
            lines: 0,
            bytes: 0,
        };
        Ok(match encoding {
            "identity" => Sink::Identity(counting),
            "gzip" => Sink::Gzip(Box::new(flate2::write::GzDecoder::new(counting))),
            "zstd" => Sink::Zstd(Box::new(
                zstd::stream::write::Decoder::new(counting).map_err(ExportError::Write)?,
            )),
            other => return Err(ExportError::Encoding(other.to_owned())),
        })
    }

    fn write_all(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        match self {
            Sink::Identity(w) => w.write_all(chunk),
            Sink::Gzip(w) => w.write_all(chunk),
            Sink::Zstd(w) => w.write_all(chunk),
        }
    }

    fn lines(&self) -> u64 {
        match self {
            Sink::Identity(w) => w.lines,
            Sink::Gzip(w) => w.get_ref().lines,
            Sink::Zstd(w) => w.get_ref().lines,
        }
    }

    fn finish(self) -> std::io::Result<Counting<W>> {
        let mut counting = match self {
            Sink::Identity(w) => w,
            Sink::Gzip(w) => w.finish()?,
            Sink::Zstd(mut w) => {
                w.flush()?;
                w.into_inner()
            }
        };
        counting.flush()?;
        Ok(counting)
    }
}

/// Streams the export into `out`; checks the line count against `X-Total-Count`.
pub async fn export<W: Write>(
    api: &Api,
    query: &ExportQuery,
    out: W,
    progress: &dyn Progress,
) -> Result<ExportReport, ExportError> {
    let started = std::time::Instant::now();
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("zstd, gzip"));
    let mut response = api.get("findings/export", &query.pairs(), headers).await?;
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let encoding = header(CONTENT_ENCODING.as_str()).unwrap_or_else(|| "identity".into());
    let total = header("x-total-count");
    let synced_through = header("x-synced-through");
    progress.begin(
        "export",
        total.as_deref().and_then(|t| t.parse().ok()).unwrap_or(0),
    );
    let mut sink = Sink::new(&encoding, out)?;
    let mut wire_bytes = 0u64;
    let cut = |lines: u64, cause: String| ExportError::Cut {
        lines,
        total: total.clone().unwrap_or_else(|| "?".into()),
        cause,
    };
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                wire_bytes += chunk.len() as u64;
                let before = sink.lines();
                sink.write_all(&chunk).map_err(ExportError::Write)?;
                progress.advance(sink.lines() - before);
            }
            Ok(None) => break,
            Err(e) => {
                progress.end();
                return Err(cut(sink.lines(), describe(&e)));
            }
        }
    }
    progress.end();
    let counting = sink.finish().map_err(ExportError::Write)?;
    if let Some(expected) = &total
        && expected.parse::<u64>().ok() != Some(counting.lines)
    {
        return Err(cut(counting.lines, "fewer lines than X-Total-Count".into()));
    }
    Ok(ExportReport {
        lines: counting.lines,
        bytes: counting.bytes,
        wire_bytes,
        encoding,
        synced_through,
        seconds: started.elapsed().as_secs_f64(),
    })
}
