//! `GET /identities` and `GET /identities/{id}`.

use actix_web::{HttpRequest, HttpResponse, web};
use posture_domain::{Error, IdentityId, Scope, identity::IdentityFilter};
use posture_wire::{
    DataResponse, ListResponse,
    identities::{IdentityDetailResponse, IdentityResponse},
};

use super::{
    Endpoint, HttpMethod, ID, LIMIT, OFFSET, Success, TENANT, list_response, schema, tenant_filter,
};
use crate::{auth::Caller, error::ApiError, query::QueryParams, state::ApiState};

pub static LIST: Endpoint = Endpoint {
    method: HttpMethod::Get,
    path: "/identities",
    scope: Some(Scope::ReadIdentities),
    operation_id: "listIdentities",
    tag: "identities",
    summary: "List identities",
    description: "Users, groups, service principals, managed identities and agent identities \
                  across the customer's connected tenants, ordered by id.",
    params: &[&LIMIT, &OFFSET, &TENANT],
    body: None,
    success: Success::Json {
        status: 200,
        description: "A page of identities.",
        schema: schema::<ListResponse<IdentityResponse>>,
    },
    errors: &[400, 404],
    success_headers: &[],
    handler: || web::route().to(list_identities),
};

pub static GET: Endpoint = Endpoint {
    method: HttpMethod::Get,
    path: "/identities/{id}",
    scope: Some(Scope::ReadIdentities),
    operation_id: "getIdentity",
    tag: "identities",
    summary: "Get an identity with its role assignments",
    description: "One identity of the customer, including its role assignments. An id of \
                  another customer is 404.",
    params: &[&ID],
    body: None,
    success: Success::Json {
        status: 200,
        description: "The identity.",
        schema: schema::<DataResponse<IdentityDetailResponse>>,
    },
    errors: &[400, 404],
    success_headers: &[],
    handler: || web::route().to(get_identity),
};

async fn list_identities(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let mut query = QueryParams::parse(req.query_string())?;
    let page = query.page()?;
    let tenant = query.take("tenant")?;
    query.finish()?;
    let tenant = tenant_filter(&state, caller.scope(), tenant).await?;
    let filter = IdentityFilter { tenant };
    let result = state
        .ports
        .identities
        .list_identities(caller.scope(), &filter, page)
        .await?;
    Ok(list_response(
        result.map(IdentityResponse::from),
        page,
        tenant,
    ))
}

async fn get_identity(
    req: HttpRequest,
    id: web::Path<String>,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    QueryParams::parse(req.query_string())?.finish()?;
    // An id that cannot exist is simply not found.
    let id: IdentityId = id.parse().map_err(|_| ApiError::NotFound(None))?;
    match state
        .ports
        .identities
        .get_identity(caller.scope(), &id)
        .await
    {
        Ok(detail) => Ok(HttpResponse::Ok().json(DataResponse {
            data: IdentityDetailResponse::from(detail),
        })),
        Err(Error::NotFound) => Err(ApiError::NotFound(Some("identity not found"))),
        Err(e) => Err(e.into()),
    }
}
