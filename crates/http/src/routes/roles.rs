//! `GET /roles`: right-sized role recommendations.

use actix_web::{HttpResponse, web};
use posture_domain::{Scope, recommendation::RecommendationFilter};
use posture_wire::{
    ListResponse,
    paging::{ModifiedSinceQuery, OrderQuery, PageQuery},
    query::TenantQuery,
    recommendations::RoleRecommendationResponse,
};

use super::{Access, Endpoint, ReadsFrom, Success, Tagging};
use crate::{
    auth::Caller,
    error::ApiError,
    input::{ListQuery, part},
    reads::Reads,
};

pub static LIST: Endpoint = Endpoint {
    path: "/roles",
    operation_id: "listRoleRecommendations",
    tag: "roles",
    summary: "List right-sized role recommendations",
    description: "Each recommendation with its target identity, the roles it holds, the role \
                  recommended instead and what applying it removes; ordered by id.",
    query: &[
        part::<TenantQuery>(),
        part::<OrderQuery>(),
        part::<ModifiedSinceQuery>(),
        part::<PageQuery>(),
    ],
    success_headers: &["Link"],
    success: Success::json::<ListResponse<RoleRecommendationResponse>>(
        200,
        "A page of recommendations.",
    ),
    errors: &[400, 404],
    handler: || web::route().to(list_roles),
    tagging: Tagging::DataVersion,
    reads: ReadsFrom::Replica,
    ..Endpoint::open_to(Access::Scope(Scope::ReadRoles))
};

async fn list_roles(
    caller: Caller,
    list: ListQuery,
    reads: Reads,
) -> Result<HttpResponse, ApiError> {
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
