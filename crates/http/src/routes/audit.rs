//! `GET /audit-events` and `GET /audit-events/export`: the customer's audit feed
//! (docs/audit.md), for its SIEM.
//!
//! The feed is read oldest first after a cursor (an event's id), as the events feed is,
//! and serves lines a few seconds old only (`AUDIT_SETTLE`): a line is stamped when it is
//! inserted and seen once committed, so a reader at the end never steps over a line that
//! committed a moment after a later one. The export streams every matching event, a page
//! at a time, each page read when the client has taken the previous one.

use actix_web::{
    HttpRequest, HttpResponse,
    http::header::{self, ContentDisposition, DispositionParam, DispositionType},
    web::{self, Bytes, BytesMut},
};
use posture_domain::{
    Refusal, Scope,
    audit::{AUDIT_SETTLE, AuditExportFormat, AuditFilter, AuditPage},
};
use posture_wire::{
    audit::{
        AuditEventListResponse, AuditEventResponse, AuditEventsQuery, AuditExportQuery,
        AuditListMeta, MAX_AUDIT_LIMIT,
    },
    ndjson,
    ocsf_audit::OcsfAuditEvent,
};
use schemars::{Schema, SchemaGenerator, json_schema};

use super::{Access, Answer, Answers, Built, Content, Endpoint, Reply};
use crate::{
    auth::Caller,
    error::ApiError,
    handler,
    input::{Input, canonical_query},
    state::ApiState,
};

pub static LIST: Endpoint = Endpoint {
    path: "/audit-events",
    operation_id: "listAuditEvents",
    tag: "audit",
    summary: "List audit events",
    description: "The customer's audit feed, oldest first: keys and OAuth clients issued, \
                  revoked, rotated, fenced by an allow-list, used from a new address or \
                  refused by their allow-list; console sign-ins, refused sign-ins and \
                  sessions; sign-in and provisioning settings; SCIM's users and groups. Each \
                  names its actor, its target and the address it came from. Read on `after` \
                  the last event read (`meta.nextCursor`); an event appears once it is 5 \
                  seconds old. Kept a year by default. Needs `read:audit`. Documented, with \
                  every type, in docs/audit.md.",
    success: "A page of audit events.",
    success_headers: &["Link"],
    errors: &[400],
    ..Endpoint::of(handler!(list_audit_events), Access::Scope(Scope::ReadAudit))
};

pub static EXPORT: Endpoint = Endpoint {
    path: "/audit-events/export",
    operation_id: "exportAuditEvents",
    tag: "audit",
    summary: "Export audit events as NDJSON or OCSF",
    description: "Every audit event matching `type` and `since`, oldest first, streamed, one \
                  per line (the last line too ends in a line feed): as the feed shows them \
                  (`format=ndjson`) or as OCSF 1.8.0 events (`format=ocsf`: \
                  Authentication, Account Change or API Activity; docs/audit.md maps each \
                  type). Needs `read:audit`.",
    success: "The events, one per line.",
    success_headers: &["Content-Disposition"],
    errors: &[400],
    ..Endpoint::of(
        handler!(export_audit_events),
        Access::Scope(Scope::ReadAudit),
    )
};

/// What a read serves: lines older than this (and committed: the store's rule).
fn settled(state: &ApiState) -> chrono::DateTime<chrono::Utc> {
    state.clock.now() - AUDIT_SETTLE
}

async fn read(
    state: &ApiState,
    caller: &Caller,
    filter: &AuditFilter,
    settled: chrono::DateTime<chrono::Utc>,
) -> Result<AuditPage, ApiError> {
    state
        .ports
        .audit
        .audit_feed(caller.scope(), filter, settled)
        .await
        .map_err(|e| match e {
            posture_domain::Error::NotFound => ApiError::invalid(
                Refusal::CursorMismatch,
                "after",
                "after: names no audit event of yours (or one past the retention): start \
                 again from since",
            ),
            other => other.into(),
        })
}

fn filter_of(query: &AuditEventsQuery, limit: u32) -> Result<AuditFilter, ApiError> {
    let after = query
        .after
        .as_ref()
        .map(|cursor| {
            cursor.0.parse::<uuid::Uuid>().map_err(|_| {
                ApiError::invalid(
                    Refusal::CursorMismatch,
                    "after",
                    "after: not an audit event's id (send meta.nextCursor)",
                )
            })
        })
        .transpose()?;
    Ok(AuditFilter {
        types: query.event_type.0.clone(),
        since: query.since.map(|t| t.0),
        after,
        limit,
    })
}

async fn list_audit_events(
    req: HttpRequest,
    caller: Caller,
    Input(query): Input<AuditEventsQuery>,
    state: web::Data<ApiState>,
) -> Result<Reply<AuditEventListResponse>, ApiError> {
    let filter = filter_of(&query, query.limit())?;
    let page = read(&state, &caller, &filter, settled(&state)).await?;
    let next_cursor = page
        .events
        .last()
        .map(|e| e.id)
        .or(filter.after)
        .map(|id| id.to_string());
    let mut reply = Reply::new(&AuditEventListResponse {
        data: page
            .events
            .into_iter()
            .filter_map(AuditEventResponse::of)
            .collect(),
        meta: AuditListMeta {
            limit: filter.limit,
            next_cursor: next_cursor.clone(),
            has_more: page.has_more,
        },
    });
    if let (true, Some(cursor)) = (page.has_more, &next_cursor) {
        let mut link =
            form_urlencoded::Serializer::new(canonical_query(req.query_string(), &["after"]));
        link.append_pair("after", cursor);
        reply = reply.header((
            header::LINK,
            format!("<{}?{}>; rel=\"next\"", req.path(), link.finish()),
        ));
    }
    Ok(reply)
}

/// The export's answer: the events as lines.
enum Lines {}

impl Answers for Lines {
    const ANSWER: Answer = Answer {
        status: 200,
        content: Content::Media(&[("application/x-ndjson", lines_schema)]),
    };
}

fn lines_schema(generator: &mut SchemaGenerator) -> Schema {
    let event = generator.subschema_for::<AuditEventResponse>();
    json_schema!({
        "description": "One JSON object per line: an audit event as `GET /audit-events` \
                        shows it (`format=ndjson`), or its OCSF 1.8.0 event (`format=ocsf`, \
                        mapped in docs/audit.md).",
        "anyOf": [event, {"type": "object"}]
    })
}

fn render(format: AuditExportFormat, page: AuditPage) -> Result<Bytes, serde_json::Error> {
    let mut out = Vec::with_capacity(page.events.len() * 512);
    for event in page.events.into_iter().filter_map(AuditEventResponse::of) {
        match format {
            AuditExportFormat::Ndjson => ndjson::write_line(&mut out, &event)?,
            AuditExportFormat::Ocsf => ndjson::write_line(&mut out, &OcsfAuditEvent::new(&event))?,
        }
    }
    Ok(BytesMut::from(&out[..]).freeze())
}

/// What the export's stream does next.
enum Next {
    /// Writes this page (the first, read before answering).
    Page(AuditPage),
    /// Reads the page after the cursor.
    Read,
    Done,
}

async fn export_audit_events(
    caller: Caller,
    Input(export): Input<AuditExportQuery>,
    Input(query): Input<AuditEventsQuery>,
    state: web::Data<ApiState>,
) -> Result<Built<Lines>, ApiError> {
    let format = export.format();
    let filter = filter_of(&query, MAX_AUDIT_LIMIT)?;
    // Exports take a slot, as the findings export does: a bounded number stream at once,
    // fairly between customers.
    let slot = state.exports.acquire(caller.scope().customer_id()).await?;
    // One cut-off for the whole export: it ends, however busy the log.
    let settled = settled(&state);
    // The first page is read before answering: a bad cursor is a 400, not a cut stream.
    let first = read(&state, &caller, &filter, settled).await?;
    let filename = format!(
        "audit-{}.{}",
        state.clock.now().format("%Y-%m-%d"),
        match format {
            AuditExportFormat::Ndjson => "ndjson",
            AuditExportFormat::Ocsf => "ocsf.ndjson",
        }
    );
    let body = futures_util::stream::unfold(
        (Next::Page(first), filter, state, caller, slot),
        move |(next, mut filter, state, caller, slot)| async move {
            let page = match next {
                Next::Done => return None,
                Next::Page(page) => page,
                Next::Read => match read(&state, &caller, &filter, settled).await {
                    Ok(page) => page,
                    // Cut off, not ended: the client sees a broken transfer, never a short
                    // export that looks whole.
                    Err(e) => {
                        tracing::warn!(error = %e, "an audit export stopped: a page could not be read");
                        let cut = actix_web::error::ErrorServiceUnavailable("export cut off");
                        return Some((Err(cut), (Next::Done, filter, state, caller, slot)));
                    }
                },
            };
            filter.after = page.events.last().map(|e| e.id).or(filter.after);
            let next = if page.has_more {
                Next::Read
            } else {
                Next::Done
            };
            let lines = render(format, page).map_err(|e| {
                tracing::error!(error = %e, "an audit export's page could not be written");
                actix_web::error::ErrorInternalServerError("export")
            });
            Some((lines, (next, filter, state, caller, slot)))
        },
    );
    Ok(Built::new(
        HttpResponse::Ok()
            .content_type("application/x-ndjson")
            .insert_header(ContentDisposition {
                disposition: DispositionType::Attachment,
                parameters: vec![DispositionParam::Filename(filename)],
            })
            .streaming(body),
    ))
}
