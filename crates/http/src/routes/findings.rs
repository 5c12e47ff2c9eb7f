//! `GET /findings`, `GET /findings/{id}`, its triage (`PATCH /findings/{id}`) and the
//! triage's history (`GET /findings/{id}/triage`).

use actix_web::{HttpRequest, http::header, web};
use posture_domain::{FindingId, Scope, finding::Finding};
use posture_wire::{
    DataResponse, ListResponse,
    findings::{FindingResponse, FindingsQuery},
    paging::{ModifiedSinceQuery, OrderQuery, PageQuery},
    query::TenantQuery,
    triage::{PatchFindingRequest, TriageRecordResponse},
};

use super::{Access, Endpoint, HttpMethod, ReadsFrom, Reply, Tagging};
use crate::{
    auth::Caller,
    error::ApiError,
    handler,
    input::{Id, Input, Json, ListQuery, not_found},
    preconditions::{if_match_tags, tagged},
    reads::Reads,
    state::ApiState,
};

pub static LIST: Endpoint = Endpoint {
    path: "/findings",
    operation_id: "listFindings",
    tag: "findings",
    summary: "List findings",
    description: "Analyzer findings across the customer's connected tenants, most severe \
                  first, then newest detection, then id. Filters combine (AND); values within \
                  one filter are alternatives (OR). `meta.total` counts every match.",
    success: "A page of findings.",
    success_headers: &["Link"],
    errors: &[400, 404],
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::of(handler!(list_findings), Access::Scope(Scope::ReadFindings))
};

pub static GET: Endpoint = Endpoint {
    path: "/findings/{id}",
    operation_id: "getFinding",
    tag: "findings",
    summary: "Get a finding",
    description: "One finding of the customer, with the affected identity summarised. An id \
                  of another customer is 404. Its `ETag` is strong: send it as `If-Match` to \
                  `PATCH` the finding only if it has not changed, or as `If-None-Match` to \
                  get 304 while it has not.",
    success: "The finding.",
    errors: &[400, 404],
    success_headers: &["ETag"],
    tagging: Tagging::ByRoute,
    reads: ReadsFrom::Replica,
    ..Endpoint::of(handler!(get_finding), Access::Scope(Scope::ReadFindings))
};

pub static PATCH: Endpoint = Endpoint {
    method: HttpMethod::Patch,
    path: "/findings/{id}",
    operation_id: "triageFinding",
    tag: "findings",
    summary: "Triage a finding",
    description: "Writes the customer's triage of a finding: `acknowledged`, `dismissed` or \
                  `risk_accepted` (the last two with a `reason`), optionally until \
                  `expiresAt`, or `untriaged` to reset it. The mark replaces the one before, \
                  is kept by later analyzer passes, moves the finding's `modifiedAt` and is \
                  recorded in its history. Send the finding's `ETag` as `If-Match` to write \
                  only if nobody changed it since you read it (412 otherwise); without \
                  `If-Match` the last write wins. Needs `write:findings` and \
                  `read:findings`. While an analyzer pass of the customer is being written \
                  the write waits for it, up to 5 seconds (then 503 with `Retry-After`). \
                  Counts against the customer's triage budgets (120 writes a minute; 32 MiB \
                  an hour of what they add to storage, 1 KiB a finding and the comment once): \
                  429 past either, its `RateLimit-Policy` naming it.",
    body: "The triage to write.",
    success: "The finding as triaged.",
    errors: &[400, 404, 412, 413, 415, 422],
    success_headers: &["ETag"],
    if_match: true,
    ..Endpoint::of(handler!(triage_finding), super::triage::TRIAGES)
};

pub static HISTORY: Endpoint = Endpoint {
    path: "/findings/{id}/triage",
    operation_id: "listFindingTriage",
    tag: "findings",
    summary: "List a finding's triage history",
    description: "The finding's newest 100 changes of triage (older ones are forgotten as \
                  new ones come), newest first: who (the key), when, from which state and \
                  reason to which, with its comment and expiry. An id of another customer is \
                  404.",
    success: "A page of changes.",
    success_headers: &["Link"],
    errors: &[400, 404],
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::of(handler!(triage_history), Access::Scope(Scope::ReadFindings))
};

async fn list_findings(
    caller: Caller,
    Input(filters): Input<FindingsQuery>,
    list: ListQuery<(TenantQuery, OrderQuery, ModifiedSinceQuery, PageQuery)>,
    reads: Reads,
) -> Result<Reply<ListResponse<FindingResponse>>, ApiError> {
    let filter = filters.filter(list.tenant_id(), list.modified_since());
    let page = reads
        .findings
        .list_findings(caller.scope(), &filter, list.page())
        .await?;
    Ok(list.respond(page.map(FindingResponse::from)))
}

fn finding_tag(finding: &Finding) -> header::EntityTag {
    header::EntityTag::new_strong(finding.tag())
}

async fn get_finding(
    caller: Caller,
    Id(id): Id<FindingId>,
    req: HttpRequest,
    reads: Reads,
) -> Result<Reply<DataResponse<FindingResponse>>, ApiError> {
    let finding = reads
        .findings
        .get_finding(caller.scope(), &id)
        .await
        .map_err(not_found::<FindingId>)?;
    let tag = finding_tag(&finding);
    Ok(tagged(
        &req,
        tag,
        DataResponse {
            data: FindingResponse::from(finding),
        },
    ))
}

async fn triage_finding(
    caller: Caller,
    Id(id): Id<FindingId>,
    req: HttpRequest,
    Json(request): Json<PatchFindingRequest>,
    state: web::Data<ApiState>,
) -> Result<Reply<DataResponse<FindingResponse>>, ApiError> {
    let expected = if_match_tags(&req)?;
    let change = super::triage::change_of(request.triage, state.clock.now())?;
    super::triage::spend_write_budget(&state, &caller, 1, &change).await?;
    let finding = state
        .ports
        .reads
        .findings
        .triage_finding(
            caller.scope(),
            &id,
            &change,
            caller.key_id(),
            expected.as_deref(),
        )
        .await
        .map_err(not_found::<FindingId>)?;
    tracing::info!(
        finding.id = %id.as_str(),
        triage.state = change.state.as_str(),
        "finding triaged"
    );
    let tag = finding_tag(&finding);
    let data = FindingResponse::from(finding);
    Ok(Reply::new(&DataResponse { data }).header((header::ETAG, tag)))
}

async fn triage_history(
    caller: Caller,
    Id(id): Id<FindingId>,
    list: ListQuery<(PageQuery,)>,
    reads: Reads,
) -> Result<Reply<ListResponse<TriageRecordResponse>>, ApiError> {
    let page = reads
        .findings
        .triage_history(caller.scope(), &id, list.page())
        .await
        .map_err(not_found::<FindingId>)?;
    Ok(list.respond(page.map(TriageRecordResponse::from)))
}
