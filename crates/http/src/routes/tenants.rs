//! `GET /tenants`.

use actix_web::{HttpRequest, HttpResponse, web};
use posture_domain::{Page, Scope};
use posture_wire::{ListResponse, tenants::TenantResponse};

use super::{
    Endpoint, HttpMethod, LIMIT, OFFSET, Success, TENANT, list_response, resolve_tenant, schema,
};
use crate::{auth::Caller, error::ApiError, query::QueryParams, state::ApiState};

pub static LIST: Endpoint = Endpoint {
    method: HttpMethod::Get,
    path: "/tenants",
    scope: Some(Scope::ReadIdentities),
    operation_id: "listTenants",
    tag: "tenants",
    summary: "List connected tenants",
    description: "The cloud directory tenants connected to the customer, ordered by \
                  cloudTenantId. Gated by `read:identities`.",
    params: &[&LIMIT, &OFFSET, &TENANT],
    body: None,
    success: Success::Json {
        status: 200,
        description: "A page of tenants.",
        schema: schema::<ListResponse<TenantResponse>>,
    },
    errors: &[400, 404],
    success_headers: &[],
    handler: || web::route().to(list_tenants),
};

async fn list_tenants(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let mut query = QueryParams::parse(req.query_string())?;
    let page = query.page()?;
    let tenant = query.take("tenant")?;
    query.finish()?;
    let scope = caller.scope();
    let filter = resolve_tenant(&state, scope, tenant).await?;
    let tenant = filter.as_ref().map(|t| t.cloud_tenant_id);
    let result = match filter {
        // Filtered to one tenant: that row is the whole list.
        Some(tenant) => {
            let items = if page.offset() == 0 {
                vec![tenant]
            } else {
                Vec::new()
            };
            Page { items, total: 1 }
        }
        None => state.ports.tenants.list_tenants(scope, page).await?,
    };
    Ok(list_response(
        result.map(TenantResponse::from),
        page,
        tenant,
    ))
}
