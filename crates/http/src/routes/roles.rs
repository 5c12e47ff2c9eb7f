//! `GET /roles`: right-sized role recommendations.

use actix_web::{HttpRequest, HttpResponse, web};
use posture_domain::{Scope, recommendation::RecommendationFilter};
use posture_wire::{ListResponse, recommendations::RoleRecommendationResponse};

use super::{
    Endpoint, HttpMethod, LIMIT, OFFSET, Success, TENANT, list_response, schema, tenant_filter,
};
use crate::{auth::Caller, error::ApiError, query::QueryParams, state::ApiState};

pub static LIST: Endpoint = Endpoint {
    method: HttpMethod::Get,
    path: "/roles",
    scope: Some(Scope::ReadRoles),
    operation_id: "listRoleRecommendations",
    tag: "roles",
    summary: "List right-sized role recommendations",
    description: "Each recommendation with its target identity, the roles it holds, the role \
                  recommended instead and what applying it removes; ordered by id.",
    params: &[&TENANT, &LIMIT, &OFFSET],
    body: None,
    success: Success::Json {
        status: 200,
        description: "A page of recommendations.",
        schema: schema::<ListResponse<RoleRecommendationResponse>>,
    },
    errors: &[400, 404],
    success_headers: &[],
    handler: || web::route().to(list_roles),
};

async fn list_roles(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let mut query = QueryParams::parse(req.query_string())?;
    let page = query.page()?;
    let tenant = query.take("tenant")?;
    query.finish()?;
    let tenant = tenant_filter(&state, caller.scope(), tenant).await?;
    let filter = RecommendationFilter { tenant };
    let result = state
        .ports
        .recommendations
        .list_recommendations(caller.scope(), &filter, page)
        .await?;
    Ok(list_response(
        result.map(RoleRecommendationResponse::from),
        page,
        tenant,
    ))
}
