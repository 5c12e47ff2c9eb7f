//! `GET /identities` and `GET /identities/{id}`.

use actix_web::{HttpResponse, web};
use posture_domain::{IdentityId, Scope, identity::IdentityFilter};
use posture_wire::{
    DataResponse, ListResponse,
    identities::{IdentityDetailResponse, IdentityResponse},
    paging::{ModifiedSinceQuery, OrderQuery, PageQuery},
    query::TenantQuery,
};

use super::{Access, Endpoint, ReadsFrom, Success, Tagging};
use crate::{
    auth::Caller,
    error::ApiError,
    input::{EXTERNAL_ID, Id, ListQuery, not_found, part},
    reads::Reads,
};

pub static LIST: Endpoint = Endpoint {
    path: "/identities",
    operation_id: "listIdentities",
    tag: "identities",
    summary: "List identities",
    description: "Users, groups, service principals, managed identities and agent identities \
                  across the customer's connected tenants, ordered by id.",
    query: &[
        part::<PageQuery>(),
        part::<TenantQuery>(),
        part::<OrderQuery>(),
        part::<ModifiedSinceQuery>(),
    ],
    success_headers: &["Link"],
    success: Success::json::<ListResponse<IdentityResponse>>(200, "A page of identities."),
    errors: &[400, 404],
    handler: || web::route().to(list_identities),
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::open_to(Access::Scope(Scope::ReadIdentities))
};

pub static GET: Endpoint = Endpoint {
    path: "/identities/{id}",
    operation_id: "getIdentity",
    tag: "identities",
    summary: "Get an identity with its role assignments",
    description: "One identity of the customer, including its role assignments. An id of \
                  another customer is 404.",
    path_params: &[&EXTERNAL_ID],
    success: Success::json::<DataResponse<IdentityDetailResponse>>(200, "The identity."),
    errors: &[400, 404],
    handler: || web::route().to(get_identity),
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::open_to(Access::Scope(Scope::ReadIdentities))
};

async fn list_identities(
    caller: Caller,
    list: ListQuery,
    reads: Reads,
) -> Result<HttpResponse, ApiError> {
    let filter = IdentityFilter {
        modified_since: list.modified_since(),
        tenant: list.tenant_id(),
    };
    let page = reads
        .identities
        .list_identities(caller.scope(), &filter, list.page())
        .await?;
    Ok(list.respond(page.map(IdentityResponse::from)))
}

async fn get_identity(
    caller: Caller,
    Id(id): Id<IdentityId>,
    reads: Reads,
) -> Result<HttpResponse, ApiError> {
    let detail = reads
        .identities
        .get_identity(caller.scope(), &id)
        .await
        .map_err(not_found::<IdentityId>)?;
    Ok(HttpResponse::Ok().json(DataResponse {
        data: IdentityDetailResponse::from(detail),
    }))
}
