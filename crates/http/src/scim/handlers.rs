//! The handlers `/Users` and `/Groups` share, generic over their [`Kind`]: create, read,
//! replace (PUT), delete, the list and its `.search`. The table (`mod.rs`) mounts them
//! for each kind, beside its own PATCH.

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use posture_domain::scim::ListWindow;
use serde_json::Value;

use super::{
    ScimError,
    exchange::{
        ListParams, Shape, answer, base, if_match, json_body, not_modified, shape_of, unchanged,
    },
    kind::Kind,
    render,
};
use crate::{auth::Caller, state::ApiState};

pub(super) async fn create<K: Kind>(
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

pub(super) async fn read<K: Kind>(
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

pub(super) async fn replace<K: Kind>(
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

pub(super) async fn delete<K: Kind>(
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

pub(super) async fn list<K: Kind>(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ScimError> {
    let params = ListParams::of(&req)?;
    listed::<K>(&req, &caller, &state, &params).await
}

pub(super) async fn search<K: Kind>(
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
