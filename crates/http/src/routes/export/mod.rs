//! `GET /findings/export`: every matching finding as NDJSON, CEF or OCSF events, streamed.
//!
//! The response starts as soon as the first page is read; each further page is read only
//! when the client has taken the previous one (actix polls the stream when the socket can
//! take more), so memory holds one page whatever the size of the export (`stream.rs`). A
//! client that goes away drops the stream, and with it the database cursor; one that stops
//! reading is cut off after the stall bound. Exports take a slot (`export_slots.rs`): a
//! bounded number stream at once, fairly between customers.

mod stream;

use actix_web::{
    HttpResponse,
    http::header::{self, ContentDisposition, DispositionParam, DispositionType},
    web::{self, Bytes, BytesMut},
};
use posture_domain::{
    Scope,
    finding::{ExportFormat, Finding},
};
use posture_wire::{
    cef,
    findings::{ExportQuery, FindingResponse, FindingsQuery},
    ndjson, ocsf,
    paging::ModifiedSinceQuery,
};
use schemars::{Schema, SchemaGenerator, json_schema};

use super::{Access, Answer, Answers, Built, Content, Endpoint, ReadsFrom};
use crate::{
    auth::Caller,
    error::ApiError,
    handler,
    input::{Input, TenantFilter},
    reads::Reads,
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
            ExportFormat::Ndjson | ExportFormat::Ocsf => "application/x-ndjson",
            ExportFormat::Cef => "text/plain; charset=utf-8",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            ExportFormat::Ndjson => "ndjson",
            ExportFormat::Cef => "cef",
            ExportFormat::Ocsf => "ocsf.ndjson",
        }
    }

    fn render(self, findings: Vec<Finding>) -> Result<Bytes, serde_json::Error> {
        let mut out = BytesMut::with_capacity(findings.len() * 512);
        for finding in findings {
            let finding = FindingResponse::from(finding);
            match self {
                ExportFormat::Ndjson => ndjson::write_line(&mut BytesWriter(&mut out), &finding)?,
                ExportFormat::Ocsf => ndjson::write_line(
                    &mut BytesWriter(&mut out),
                    &ocsf::DetectionFinding::new(&finding),
                )?,
                ExportFormat::Cef => {
                    out.extend_from_slice(cef::line(&finding).as_bytes());
                    out.extend_from_slice(b"\n");
                }
            }
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

/// NDJSON lines: the finding as `GET /findings` shows it, or (`format=ocsf`) its OCSF event.
fn ndjson_schema(generator: &mut SchemaGenerator) -> Schema {
    let finding = generator.subschema_for::<FindingResponse>();
    let event = generator.subschema_for::<ocsf::DetectionFinding<'static>>();
    json_schema!({
        "description": "One JSON object per line: a finding as `GET /findings` shows it \
                        (`format=ndjson`), or its OCSF 1.5.0 Detection Finding event \
                        (`format=ocsf`).",
        "anyOf": [finding, event]
    })
}

fn cef_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "description": "CEF lines: CEF:0|Posture|posture-api|<version>|<findingType>|<title>|<severity>|<extension>, one per finding, each ending in a line feed."
    })
}

pub static EXPORT: Endpoint = Endpoint {
    path: "/findings/export",
    operation_id: "exportFindings",
    tag: "findings",
    summary: "Export findings as NDJSON, CEF or OCSF",
    description: "Every finding matching the filters of `GET /findings` (no `limit` or \
                  `offset`), ordered by id, streamed as it is read, each line ending in a line \
                  feed (the last one too). `X-Total-Count` gives the number of lines. No match \
                  is an empty 200 body. With `modifiedSince`, only what changed since; \
                  `X-Synced-Through` is what to send next time. A customer streams at most 2 \
                  exports at once over every instance (a third waits a few seconds, then \
                  429). Documented in docs/export.md.",
    success: "The findings, one per line.",
    errors: &[400, 404],
    success_headers: &["Content-Disposition", "X-Total-Count", "X-Synced-Through"],
    reads: ReadsFrom::Replica,
    ..Endpoint::of(
        handler!(export_findings),
        Access::Scope(Scope::ReadFindings),
    )
};

/// The export's answer: the findings as lines, in the format asked for.
enum Lines {}

impl Answers for Lines {
    const ANSWER: Answer = Answer {
        status: 200,
        content: Content::Media(&[
            ("application/x-ndjson", ndjson_schema),
            ("text/plain; charset=utf-8", cef_schema),
        ]),
    };
}

async fn export_findings(
    caller: Caller,
    Input(export): Input<ExportQuery>,
    Input(filters): Input<FindingsQuery>,
    tenant: TenantFilter,
    Input(since): Input<ModifiedSinceQuery>,
    reads: Reads,
    state: web::Data<ApiState>,
) -> Result<Built<Lines>, ApiError> {
    let format = export.format();
    let filter = filters.filter(tenant.id(), since.modified_since.map(|t| t.0));
    let slot = state.exports.acquire(caller.scope().customer_id()).await?;
    let cursor = reads
        .findings
        .export_findings(caller.scope(), &filter)
        .await?;
    let total = cursor.total();
    let synced_through = cursor.synced_through();
    let body = stream::body(cursor, format, slot, state.export_stall);
    let filename = format!(
        "findings-{}.{}",
        state.clock.now().format("%Y-%m-%d"),
        format.extension()
    );
    let mut response = HttpResponse::Ok();
    response
        .content_type(format.content_type())
        .insert_header(ContentDisposition {
            disposition: DispositionType::Attachment,
            parameters: vec![DispositionParam::Filename(filename)],
        })
        .insert_header((header::HeaderName::from_static("x-total-count"), total));
    if let Some(through) = synced_through {
        response.insert_header((
            header::HeaderName::from_static("x-synced-through"),
            through.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        ));
    }
    Ok(Built::new(response.streaming(body)))
}
