//! `/Groups`: create, read, replace, PATCH of the name and members (applied as member
//! changes, without reading the members), delete, and the list; `excludedAttributes=members`
//! leaves a large group's members out.

use actix_web::{
    HttpRequest, HttpResponse,
    http::{
        StatusCode,
        header::{self, HeaderValue},
    },
    web,
};
use posture_domain::scim::{
    GroupFilter, GroupPatch, ListPage, PatchRequest, ScimGroup, ScimGroupId, group_from_resource,
};

use super::{
    ScimError,
    exchange::{ListParams, answer, base, if_match, json_body, not_modified, resource, shape_of},
    render,
};
use crate::{auth::Caller, state::ApiState};

pub(super) fn register(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/Groups", "GET, POST")
            .route(web::get().to(list))
            .route(web::post().to(create)),
    )
    // Before `/Groups/{id}`, which would take the path.
    .service(resource("/Groups/.search", "POST").route(web::post().to(search)))
    .service(
        resource("/Groups/{id}", "GET, PUT, PATCH, DELETE")
            .route(web::get().to(read))
            .route(web::put().to(replace))
            .route(web::patch().to(patch))
            .route(web::delete().to(delete)),
    );
}

fn group_id(id: &str) -> Result<ScimGroupId, ScimError> {
    id.parse().map_err(|_| ScimError::not_found())
}

async fn create(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    payload: web::Payload,
) -> Result<HttpResponse, ScimError> {
    let attributes = group_from_resource(&json_body(&req, payload).await?)?;
    let group = state
        .ports
        .scim
        .create_scim_group(caller.scope(), caller.key_id(), &attributes)
        .await?;
    let body = shape_of(&req)?.apply(render::group(&group, &base(&req)));
    Ok(answer(StatusCode::CREATED, &body, Some(group.meta.version)))
}

async fn read(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ScimError> {
    let shape = shape_of(&req)?;
    let group = state
        .ports
        .scim
        .scim_group(caller.scope(), group_id(&id)?, shape.members())
        .await?
        .ok_or_else(ScimError::not_found)?;
    if not_modified(&req, group.meta.version) {
        return Ok(super::exchange::unchanged(group.meta.version));
    }
    let body = shape.apply(render::group(&group, &base(&req)));
    Ok(answer(StatusCode::OK, &body, Some(group.meta.version)))
}

async fn replace(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ScimError> {
    let id = group_id(&id)?;
    let attributes = group_from_resource(&json_body(&req, payload).await?)?;
    let group = state
        .ports
        .scim
        .replace_scim_group(
            caller.scope(),
            caller.key_id(),
            id,
            &attributes,
            if_match(&req).as_deref(),
        )
        .await?;
    let body = shape_of(&req)?.apply(render::group(&group, &base(&req)));
    Ok(answer(StatusCode::OK, &body, Some(group.meta.version)))
}

async fn patch(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ScimError> {
    let id = group_id(&id)?;
    let request: PatchRequest = serde_json::from_value(json_body(&req, payload).await?)
        .map_err(|e| ScimError::bad_request("invalidSyntax", format!("a PATCH body: {e}")))?;
    let patch = GroupPatch::from_request(&request)?;
    // The group is answered only when asked for (`attributes`): otherwise 204, which RFC 7644
    // allows, and no read of what may be 100,000 members.
    let shape = shape_of(&req)?;
    let asked = shape.asks();
    let group = state
        .ports
        .scim
        .patch_scim_group(
            caller.scope(),
            caller.key_id(),
            id,
            &patch,
            if_match(&req).as_deref(),
            asked && shape.members(),
        )
        .await?;
    if !asked {
        let mut answer = HttpResponse::NoContent();
        if let Ok(tag) = HeaderValue::from_str(&render::etag(group.meta.version)) {
            answer.insert_header((header::ETAG, tag));
        }
        return Ok(answer.finish());
    }
    let body = shape.apply(render::group(&group, &base(&req)));
    Ok(answer(StatusCode::OK, &body, Some(group.meta.version)))
}

async fn delete(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ScimError> {
    state
        .ports
        .scim
        .delete_scim_group(
            caller.scope(),
            caller.key_id(),
            group_id(&id)?,
            if_match(&req).as_deref(),
        )
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

async fn list(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ScimError> {
    let params = ListParams::of(&req)?;
    listed(&req, &caller, &state, &params).await
}

async fn search(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    payload: web::Payload,
) -> Result<HttpResponse, ScimError> {
    let params = ListParams::of_search(&req, payload).await?;
    listed(&req, &caller, &state, &params).await
}

async fn listed(
    req: &HttpRequest,
    caller: &Caller,
    state: &ApiState,
    params: &ListParams,
) -> Result<HttpResponse, ScimError> {
    let filter = params
        .filter
        .as_deref()
        .map(str::parse::<GroupFilter>)
        .transpose()?;
    let page = page(caller, state, filter.as_ref(), params).await?;
    let base = base(req);
    let resources = page
        .resources
        .iter()
        .map(|g| params.shape.apply(render::group(g, &base)))
        .collect();
    let body = render::list(resources, page.total, params.window.start_index);
    Ok(answer(StatusCode::OK, &body, None))
}

/// One page of the customer's groups (`params.window`).
pub(super) async fn page(
    caller: &Caller,
    state: &ApiState,
    filter: Option<&GroupFilter>,
    params: &ListParams,
) -> Result<ListPage<ScimGroup>, ScimError> {
    Ok(state
        .ports
        .scim
        .list_scim_groups(
            caller.scope(),
            filter,
            params.window,
            params.shape.members(),
        )
        .await?)
}
