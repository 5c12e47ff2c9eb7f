//! `GET /findings` and `GET /findings/{id}`.

use actix_web::{HttpResponse, web};
use posture_domain::{FindingId, Scope};
use posture_wire::{
    DataResponse, ListResponse,
    findings::{FindingResponse, FindingsQuery},
    paging::{ModifiedSinceQuery, OrderQuery, PageQuery},
    query::TenantQuery,
};

use super::{Access, Endpoint, ReadsFrom, Success, Tagging};
use crate::{
    auth::Caller,
    error::ApiError,
    input::{EXTERNAL_ID, Id, Input, ListQuery, not_found, part},
    reads::Reads,
};

pub static LIST: Endpoint = Endpoint {
    path: "/findings",
    access: Access::Scope(Scope::ReadFindings),
    operation_id: "listFindings",
    tag: "findings",
    summary: "List findings",
    description: "Analyzer findings across the customer's connected tenants, most severe \
                  first, then newest detection, then id. Filters combine (AND); values within \
                  one filter are alternatives (OR). `meta.total` counts every match.",
    query: &[
        part::<FindingsQuery>(),
        part::<TenantQuery>(),
        part::<OrderQuery>(),
        part::<ModifiedSinceQuery>(),
        part::<PageQuery>(),
    ],
    success: Success::json::<ListResponse<FindingResponse>>(200, "A page of findings."),
    success_headers: &["Link"],
    errors: &[400, 404],
    handler: || web::route().to(list_findings),
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::DEFAULT
};

pub static GET: Endpoint = Endpoint {
    path: "/findings/{id}",
    access: Access::Scope(Scope::ReadFindings),
    operation_id: "getFinding",
    tag: "findings",
    summary: "Get a finding",
    description: "One finding of the customer, with the affected identity summarised. An id \
                  of another customer is 404.",
    path_params: &[&EXTERNAL_ID],
    success: Success::json::<DataResponse<FindingResponse>>(200, "The finding."),
    errors: &[400, 404],
    handler: || web::route().to(get_finding),
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::DEFAULT
};

async fn list_findings(
    caller: Caller,
    list: ListQuery,
    Input(filters): Input<FindingsQuery>,
    reads: Reads,
) -> Result<HttpResponse, ApiError> {
    let filter = filters.filter(list.tenant_id(), list.modified_since());
    let page = reads
        .findings
        .list_findings(caller.scope(), &filter, list.page())
        .await?;
    Ok(list.respond(page.map(FindingResponse::from)))
}

async fn get_finding(
    caller: Caller,
    Id(id): Id<FindingId>,
    reads: Reads,
) -> Result<HttpResponse, ApiError> {
    let finding = reads
        .findings
        .get_finding(caller.scope(), &id)
        .await
        .map_err(not_found::<FindingId>)?;
    Ok(HttpResponse::Ok().json(DataResponse {
        data: FindingResponse::from(finding),
    }))
}
