//! `GET /findings/export`: every matching finding as NDJSON or CEF, streamed.
//!
//! The response starts as soon as the first page is read; each further page is read only
//! when the client has taken the previous one (actix polls the stream when the socket can
//! take more), so memory holds one page whatever the size of the export. A client that goes
//! away drops the stream, and with it the database cursor.

use actix_web::{
    HttpResponse,
    http::header::{self, ContentDisposition, DispositionParam, DispositionType},
    web::{self, Bytes, BytesMut},
};
use chrono::Utc;
use posture_domain::{
    Scope,
    finding::{ExportFormat, Finding},
    ports::FindingBatches,
};
use posture_wire::{
    cef,
    findings::{ExportQuery, FindingResponse, FindingsQuery},
    query::TenantQuery,
};
use schemars::{Schema, SchemaGenerator, json_schema};

use super::{Endpoint, Success, schema};
use crate::{
    auth::Caller,
    error::ApiError,
    input::{Input, TenantFilter, part},
    state::ApiState,
};

/// How each line format is served.
trait Served {
    fn content_type(self) -> &'static str;
    fn extension(self) -> &'static str;
    /// One page as lines, each ending in `\n`.
    fn render(self, findings: Vec<Finding>) -> Result<Bytes, serde_json::Error>;
}

impl Served for ExportFormat {
    fn content_type(self) -> &'static str {
        match self {
            ExportFormat::Ndjson => "application/x-ndjson",
            ExportFormat::Cef => "text/plain; charset=utf-8",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            ExportFormat::Ndjson => "ndjson",
            ExportFormat::Cef => "cef",
        }
    }

    fn render(self, findings: Vec<Finding>) -> Result<Bytes, serde_json::Error> {
        let mut out = BytesMut::with_capacity(findings.len() * 512);
        for finding in findings {
            let finding = FindingResponse::from(finding);
            match self {
                ExportFormat::Ndjson => {
                    serde_json::to_writer(BytesWriter(&mut out), &finding)?;
                }
                ExportFormat::Cef => out.extend_from_slice(cef::line(&finding).as_bytes()),
            }
            out.extend_from_slice(b"\n");
        }
        Ok(out.freeze())
    }
}

/// `io::Write` into a `BytesMut`.
struct BytesWriter<'a>(&'a mut BytesMut);

impl std::io::Write for BytesWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn cef_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "description": "CEF lines: CEF:0|Posture|posture-api|<version>|<findingType>|<title>|<severity>|<extension>, one per finding, each ending in a line feed."
    })
}

pub static EXPORT: Endpoint = Endpoint {
    path: "/findings/export",
    scope: Some(Scope::ReadFindings),
    operation_id: "exportFindings",
    tag: "findings",
    summary: "Export findings as NDJSON or CEF",
    description: "Every finding matching the filters of `GET /findings` (no `limit` or \
                  `offset`), ordered by id, streamed as it is read, each line ending in a line \
                  feed (the last one too). `X-Total-Count` gives the number of lines. No match \
                  is an empty 200 body. Documented in docs/export.md.",
    query: &[
        part::<ExportQuery>(),
        part::<FindingsQuery>(),
        part::<TenantQuery>(),
    ],
    success: Success::Media {
        status: 200,
        description: "The findings, one per line.",
        content: &[
            ("application/x-ndjson", schema::<FindingResponse>),
            ("text/plain; charset=utf-8", cef_schema),
        ],
    },
    errors: &[400, 404],
    success_headers: &["Content-Disposition", "X-Total-Count"],
    handler: || web::route().to(export_findings),
    ..Endpoint::DEFAULT
};

/// The stream's state: the cursor and the page read ahead.
struct Export {
    cursor: Box<dyn FindingBatches>,
    format: ExportFormat,
    /// The next page, read while the previous one was rendered.
    ahead: Option<posture_domain::Result<Option<Vec<Finding>>>>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Export {
    /// The next chunk of the body, or `None` at the end. While a page is rendered, the next
    /// one is already being read: the database works while this thread serialises.
    async fn next_chunk(mut self) -> Option<(Result<Bytes, actix_web::Error>, Option<Self>)> {
        let page = match self.ahead.take() {
            Some(page) => page,
            None => self.cursor.next_batch().await,
        };
        match page {
            Ok(Some(batch)) => {
                let format = self.format;
                let render = async move {
                    // Let the read of the next page go out before rendering this one.
                    tokio::task::yield_now().await;
                    format.render(batch)
                };
                let (bytes, ahead) =
                    futures_util::future::join(render, self.cursor.next_batch()).await;
                match bytes {
                    Ok(bytes) => {
                        self.ahead = Some(ahead);
                        Some((Ok(bytes), Some(self)))
                    }
                    Err(e) => {
                        // A line that cannot be rendered ends the export as a database
                        // error does: truncated, never silently short.
                        tracing::error!(error = %e, "rendering an export line failed");
                        Some((Err(ApiError::Internal.into()), None))
                    }
                }
            }
            Ok(None) => None,
            Err(e) => {
                // The status is sent already: abort the response so the client sees a
                // truncated transfer, not a complete but partial export.
                tracing::error!(error = %e, "export failed mid-stream");
                Some((Err(ApiError::Internal.into()), None))
            }
        }
    }
}

async fn export_findings(
    caller: Caller,
    tenant: TenantFilter,
    Input(export): Input<ExportQuery>,
    Input(filters): Input<FindingsQuery>,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let format = export.format();
    let filter = filters.filter(tenant.id());
    let permit = state
        .exports
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| ApiError::Unavailable)?;
    let cursor = state
        .ports
        .findings
        .export_findings(caller.scope(), &filter)
        .await?;
    let total = cursor.total();
    let export = Some(Export {
        cursor,
        format,
        ahead: None,
        _permit: permit,
    });
    let body =
        futures_util::stream::unfold(export, |export| async move { export?.next_chunk().await });
    let filename = format!(
        "findings-{}.{}",
        Utc::now().format("%Y-%m-%d"),
        format.extension()
    );
    Ok(HttpResponse::Ok()
        .content_type(format.content_type())
        .insert_header(ContentDisposition {
            disposition: DispositionType::Attachment,
            parameters: vec![DispositionParam::Filename(filename)],
        })
        .insert_header((header::HeaderName::from_static("x-total-count"), total))
        .streaming(body))
}
