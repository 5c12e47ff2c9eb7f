//! `GET /roles`: right-sized role recommendations.

use posture_domain::{Scope, recommendation::RecommendationFilter};
use posture_wire::{
    ListResponse,
    paging::{ModifiedSinceQuery, OrderQuery, PageQuery},
    query::TenantQuery,
    recommendations::RoleRecommendationResponse,
};

use super::{Access, Endpoint, ReadsFrom, Reply, Tagging};
use crate::{auth::Caller, error::ApiError, handler, input::ListQuery, reads::Reads};

pub static LIST: Endpoint = Endpoint {
    path: "/roles",
    operation_id: "listRoleRecommendations",
    tag: "roles",
    summary: "List right-sized role recommendations",
    description: "Each recommendation with its target identity, the roles it holds, the role \
                  recommended instead and what applying it removes; ordered by id.",
    success_headers: &["Link"],
    success: "A page of recommendations.",
    errors: &[400, 404],
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::of(handler!(list_roles), Access::Scope(Scope::ReadRoles))
};

async fn list_roles(
    caller: Caller,
    list: ListQuery<(TenantQuery, OrderQuery, ModifiedSinceQuery, PageQuery)>,
    reads: Reads,
) -> Result<Reply<ListResponse<RoleRecommendationResponse>>, ApiError> {
    let filter = RecommendationFilter {
        modified_since: list.modified_since(),
        tenant: list.tenant_id(),
    };
    let page = reads
        .recommendations
        .list_recommendations(caller.scope(), &filter, list.page())
        .await?;
    Ok(list.respond(page.map(RoleRecommendationResponse::from)))
}
