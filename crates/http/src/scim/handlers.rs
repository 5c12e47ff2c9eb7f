//! The handlers `/Users` and `/Groups` share, generic over their [`Kind`]: create, read,
//! replace (PUT), delete, the list and its `.search`. Each kind registers them with its own
//! PATCH.

use actix_web::{HttpRequest, HttpResponse, Route, http::StatusCode, web};
use posture_domain::scim::ListWindow;
use serde_json::Value;

use super::{
    ScimError,
    exchange::{
        ListParams, Shape, answer, base, if_match, json_body, not_modified, resource, shape_of,
        unchanged,
    },
    kind::Kind,
    render,
};
use crate::{auth::Caller, state::ApiState};

/// Registers `K`'s collection, its `.search` and its resources, with `patch` as its PATCH.
pub(super) fn register<K: Kind>(cfg: &mut web::ServiceConfig, patch: Route) {
    cfg.service(
        resource(K::PATH, "GET, POST")
            .route(web::get().to(list::<K>))
            .route(web::post().to(create::<K>)),
    )
    // Before `{PATH}/{id}`, which would take the path.
    .service(resource(&format!("{}/.search", K::PATH), "POST").route(web::post().to(search::<K>)))
    .service(
        resource(&format!("{}/{{id}}", K::PATH), "GET, PUT, PATCH, DELETE")
            .route(web::get().to(read::<K>))
            .route(web::put().to(replace::<K>))
            .route(patch)
            .route(web::delete().to(delete::<K>)),
    );
}

async fn create<K: Kind>(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    payload: web::Payload,
) -> Result<HttpResponse, ScimError> {
    let attributes = K::attributes(&json_body(&req, payload).await?)?;
    let by = (caller.scope(), caller.key_id());
    let created = K::create(state.ports.scim.as_ref(), by, &attributes).await?;
    let body = shape_of(&req)?.apply(K::render(&created, &base(&req)));
    Ok(answer(
        StatusCode::CREATED,
        &body,
        Some(K::version(&created)),
    ))
}

async fn read<K: Kind>(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ScimError> {
    let shape = shape_of(&req)?;
    let found = K::read(
        state.ports.scim.as_ref(),
        caller.scope(),
        K::id(&id)?,
        &shape,
    )
    .await?
    .ok_or_else(ScimError::not_found)?;
    let version = K::version(&found);
    if not_modified(&req, version) {
        return Ok(unchanged(version));
    }
    let body = shape.apply(K::render(&found, &base(&req)));
    Ok(answer(StatusCode::OK, &body, Some(version)))
}

async fn replace<K: Kind>(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ScimError> {
    let id = K::id(&id)?;
    let attributes = K::attributes(&json_body(&req, payload).await?)?;
    let by = (caller.scope(), caller.key_id());
    let expected = if_match(&req);
    let replaced = K::replace(
        state.ports.scim.as_ref(),
        by,
        id,
        &attributes,
        expected.as_deref(),
    )
    .await?;
    let body = shape_of(&req)?.apply(K::render(&replaced, &base(&req)));
    Ok(answer(StatusCode::OK, &body, Some(K::version(&replaced))))
}

async fn delete<K: Kind>(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ScimError> {
    let by = (caller.scope(), caller.key_id());
    let expected = if_match(&req);
    K::delete(
        state.ports.scim.as_ref(),
        by,
        K::id(&id)?,
        expected.as_deref(),
    )
    .await?;
    Ok(HttpResponse::NoContent().finish())
}

async fn list<K: Kind>(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ScimError> {
    let params = ListParams::of(&req)?;
    listed::<K>(&req, &caller, &state, &params).await
}

async fn search<K: Kind>(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    payload: web::Payload,
) -> Result<HttpResponse, ScimError> {
    let params = ListParams::of_search(&req, payload).await?;
    listed::<K>(&req, &caller, &state, &params).await
}

async fn listed<K: Kind>(
    req: &HttpRequest,
    caller: &Caller,
    state: &ApiState,
    params: &ListParams,
) -> Result<HttpResponse, ScimError> {
    let filter = params.filter.as_deref().map(K::filter).transpose()?;
    let (resources, total) = rendered::<K>(
        req,
        caller,
        state,
        filter.as_ref(),
        params.window,
        &params.shape,
    )
    .await?;
    let body = render::list(resources, total, params.window.start_index);
    Ok(answer(StatusCode::OK, &body, None))
}

/// A page of `K` in `window`, each resource shown as `shape` asks; and how many match
/// `filter` in all.
pub(super) async fn rendered<K: Kind>(
    req: &HttpRequest,
    caller: &Caller,
    state: &ApiState,
    filter: Option<&K::Filter>,
    window: ListWindow,
    shape: &Shape,
) -> Result<(Vec<Value>, u64), ScimError> {
    let page = K::page(
        state.ports.scim.as_ref(),
        caller.scope(),
        filter,
        window,
        shape,
    )
    .await?;
    let base = base(req);
    let resources = page
        .resources
        .iter()
        .map(|r| shape.apply(K::render(r, &base)))
        .collect();
    Ok((resources, page.total))
}
