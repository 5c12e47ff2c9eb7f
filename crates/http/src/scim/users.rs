//! `/Users`: create, read, replace (PUT, as Okta updates), PATCH (as Entra ID updates,
//! deactivates and reactivates), delete, and the list with its filters.

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use posture_domain::{
    Error,
    scim::{
        ListPage, ListWindow, PatchRequest, ScimUser, ScimUserId, UserFilter, apply_user_patch,
        user_from_resource,
    },
};

use super::{
    ScimError,
    exchange::{ListParams, answer, base, if_match, json_body, not_modified, resource, shape_of},
    render,
};
use crate::{auth::Caller, error::ApiError, state::ApiState};

/// Times a PATCH is tried when another write came between its read
/// and its write.
const PATCH_ATTEMPTS: usize = 3;

pub(super) fn register(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/Users", "GET, POST")
            .route(web::get().to(list))
            .route(web::post().to(create)),
    )
    // Before `/Users/{id}`, which would take the path.
    .service(resource("/Users/.search", "POST").route(web::post().to(search)))
    .service(
        resource("/Users/{id}", "GET, PUT, PATCH, DELETE")
            .route(web::get().to(read))
            .route(web::put().to(replace))
            .route(web::patch().to(patch))
            .route(web::delete().to(delete)),
    );
}

/// The id of the path; one that is not a UUID names no user (404).
fn user_id(id: &str) -> Result<ScimUserId, ScimError> {
    id.parse().map_err(|_| ScimError::not_found())
}

async fn create(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    payload: web::Payload,
) -> Result<HttpResponse, ScimError> {
    let attributes = user_from_resource(&json_body(&req, payload).await?)?;
    let user = state
        .ports
        .scim
        .create_scim_user(caller.scope(), caller.key_id(), &attributes)
        .await?;
    let body = shape_of(&req)?.apply(render::user(&user, &base(&req)));
    Ok(answer(StatusCode::CREATED, &body, Some(user.meta.version)))
}

async fn read(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ScimError> {
    let user = state
        .ports
        .scim
        .scim_user(caller.scope(), user_id(&id)?)
        .await?
        .ok_or_else(ScimError::not_found)?;
    if not_modified(&req, user.meta.version) {
        return Ok(super::exchange::unchanged(user.meta.version));
    }
    let body = shape_of(&req)?.apply(render::user(&user, &base(&req)));
    Ok(answer(StatusCode::OK, &body, Some(user.meta.version)))
}

async fn replace(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ScimError> {
    let id = user_id(&id)?;
    let attributes = user_from_resource(&json_body(&req, payload).await?)?;
    let user = state
        .ports
        .scim
        .replace_scim_user(
            caller.scope(),
            caller.key_id(),
            id,
            &attributes,
            if_match(&req).as_deref(),
        )
        .await?;
    let body = shape_of(&req)?.apply(render::user(&user, &base(&req)));
    Ok(answer(StatusCode::OK, &body, Some(user.meta.version)))
}

async fn patch(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    id: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, ScimError> {
    let id = user_id(&id)?;
    let request: PatchRequest = serde_json::from_value(json_body(&req, payload).await?)
        .map_err(|e| ScimError::bad_request("invalidSyntax", format!("a PATCH body: {e}")))?;
    let wanted = if_match(&req);
    let scim = &state.ports.scim;
    let mut attempt = 0;
    let user = loop {
        attempt += 1;
        let mut user = scim
            .scim_user(caller.scope(), id)
            .await?
            .ok_or_else(ScimError::not_found)?;
        // With `If-Match`, the version read must be one it names.
        if wanted
            .as_ref()
            .is_some_and(|wanted| !wanted.contains(&user.meta.version))
        {
            return Err(Error::PreconditionFailed(
                "the resource changed since that version".to_owned(),
            )
            .into());
        }
        apply_user_patch(&mut user.attributes, &request)?;
        // The write holds only if nothing came between the read and itself: else read again.
        match scim
            .replace_scim_user(
                caller.scope(),
                caller.key_id(),
                id,
                &user.attributes,
                Some(&[user.meta.version]),
            )
            .await
        {
            Err(Error::PreconditionFailed(_)) if attempt < PATCH_ATTEMPTS => {}
            // Busy, not 412: the version the client named (if any) still held when read.
            Err(Error::PreconditionFailed(_)) => {
                return Err(
                    ApiError::Busy("the user is being changed by other requests; retry").into(),
                );
            }
            outcome => break outcome?,
        }
    };
    let body = shape_of(&req)?.apply(render::user(&user, &base(&req)));
    Ok(answer(StatusCode::OK, &body, Some(user.meta.version)))
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
        .delete_scim_user(
            caller.scope(),
            caller.key_id(),
            user_id(&id)?,
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
        .map(str::parse::<UserFilter>)
        .transpose()?;
    let page = page(caller, state, filter.as_ref(), params.window).await?;
    let base = base(req);
    let resources = page
        .resources
        .iter()
        .map(|u| params.shape.apply(render::user(u, &base)))
        .collect();
    let body = render::list(resources, page.total, params.window.start_index);
    Ok(answer(StatusCode::OK, &body, None))
}

/// One page of the customer's users.
pub(super) async fn page(
    caller: &Caller,
    state: &ApiState,
    filter: Option<&UserFilter>,
    window: ListWindow,
) -> Result<ListPage<ScimUser>, ScimError> {
    Ok(state
        .ports
        .scim
        .list_scim_users(caller.scope(), filter, window)
        .await?)
}
