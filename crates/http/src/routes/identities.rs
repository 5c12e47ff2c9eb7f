//! `GET /identities` and `GET /identities/{id}`.

use posture_domain::{IdentityId, Scope, identity::IdentityFilter};
use posture_wire::{
    DataResponse, ListResponse,
    identities::{IdentityDetailResponse, IdentityResponse},
    paging::{ModifiedSinceQuery, OrderQuery, PageQuery},
    query::TenantQuery,
};

use super::{Access, Endpoint, ReadsFrom, Reply, Tagging};
use crate::{
    auth::Caller,
    error::ApiError,
    handler,
    input::{Id, ListQuery, not_found},
    reads::Reads,
};

pub static LIST: Endpoint = Endpoint {
    path: "/identities",
    operation_id: "listIdentities",
    tag: "identities",
    summary: "List identities",
    description: "Users, groups, service principals, managed identities and agent identities \
                  across the customer's connected tenants, ordered by id.",
    success_headers: &["Link"],
    success: "A page of identities.",
    errors: &[400, 404],
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::of(
        handler!(list_identities),
        Access::Scope(Scope::ReadIdentities),
    )
};

pub static GET: Endpoint = Endpoint {
    path: "/identities/{id}",
    operation_id: "getIdentity",
    tag: "identities",
    summary: "Get an identity with its role assignments",
    description: "One identity of the customer, including its role assignments. An id of \
                  another customer is 404.",
    success: "The identity.",
    errors: &[400, 404],
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::of(handler!(get_identity), Access::Scope(Scope::ReadIdentities))
};

async fn list_identities(
    caller: Caller,
    list: ListQuery<(PageQuery, TenantQuery, OrderQuery, ModifiedSinceQuery)>,
    reads: Reads,
) -> Result<Reply<ListResponse<IdentityResponse>>, ApiError> {
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
) -> Result<Reply<DataResponse<IdentityDetailResponse>>, ApiError> {
    let detail = reads
        .identities
        .get_identity(caller.scope(), &id)
        .await
        .map_err(not_found::<IdentityId>)?;
    Ok(Reply::new(&DataResponse {
        data: IdentityDetailResponse::from(detail),
    }))
}
