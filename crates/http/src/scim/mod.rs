//! SCIM 2.0 at `/scim/v2` (RFC 7644): customers' identity providers provision the users and
//! groups of the customer's console with a key holding `provision:scim`.
//!
//! The gate ([`gate`], which the one middleware runs for every request under [`PREFIX`]) is
//! the API's (a key, its rate limit and its customer's budget), then the scope:
//! without `provision:scim` a key gets 403 here; a write (a creation, replacement, change or
//! deletion) counts against its customer's SCIM write budget too. Every answer, errors included, is
//! `application/scim+json`; a body is JSON (`application/scim+json` or `application/json`)
//! of at most [`MAX_BODY_BYTES`]. `discovery.rs` describes the service, `handlers.rs`
//! serves both resources over what `kind.rs` says of each (`users.rs` and `groups.rs`
//! hold their PATCH), [`TABLE`] mounts them all, `exchange.rs` reads their requests and answers in
//! SCIM's shape, `render.rs` shows resources, `error.rs` answers errors.

mod discovery;
mod error;
mod exchange;
mod groups;
mod handlers;
mod kind;
mod render;
mod users;

use actix_web::{
    Error, HttpMessage, HttpRequest, HttpResponse,
    body::{EitherBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::{
        StatusCode,
        header::{self, HeaderValue},
    },
    middleware::Next,
    web,
};
use posture_domain::{
    Scope,
    scim::{GroupFilter, ListWindow, UserFilter},
};

pub(crate) use self::error::ScimError;
pub use self::exchange::{MAX_BODY_BYTES, PREFIX};
use self::{
    exchange::{ListParams, answer, base},
    kind::{Groups, Users},
};
use crate::{
    auth::Caller,
    error::ApiError,
    gate,
    mount::{self, Mount},
    state::ApiState,
};

/// SCIM's routes under [`PREFIX`], in the order actix tries their templates (a literal
/// `.search` before the `{id}` that would take it): the one list the scope is mounted
/// from and [`routes`] reads its templates from.
const TABLE: &[Mount] = &[
    Mount::get("/ServiceProviderConfig", || web::to(discovery_config)),
    Mount::get("/ResourceTypes", || web::to(resource_types)),
    Mount::get("/ResourceTypes/{id}", || web::to(resource_type)),
    Mount::get("/Schemas", || web::to(schemas)),
    Mount::get("/Schemas/{id}", || web::to(schema)),
    Mount::post("/.search", || web::to(search_all)),
    Mount::get("/Users", || web::to(handlers::list::<Users>)),
    Mount::post("/Users", || web::to(handlers::create::<Users>)),
    Mount::post("/Users/.search", || web::to(handlers::search::<Users>)),
    Mount::get("/Users/{id}", || web::to(handlers::read::<Users>)),
    Mount::put("/Users/{id}", || web::to(handlers::replace::<Users>)),
    Mount::patch("/Users/{id}", || web::to(users::patch)),
    Mount::delete("/Users/{id}", || web::to(handlers::delete::<Users>)),
    Mount::get("/Groups", || web::to(handlers::list::<Groups>)),
    Mount::post("/Groups", || web::to(handlers::create::<Groups>)),
    Mount::post("/Groups/.search", || web::to(handlers::search::<Groups>)),
    Mount::get("/Groups/{id}", || web::to(handlers::read::<Groups>)),
    Mount::put("/Groups/{id}", || web::to(handlers::replace::<Groups>)),
    Mount::patch("/Groups/{id}", || web::to(groups::patch)),
    Mount::delete("/Groups/{id}", || web::to(handlers::delete::<Groups>)),
];

/// SCIM's route templates under [`PREFIX`]: what the access log and the metrics name its
/// requests by (the metrics test checks every route label is a template).
pub fn routes() -> Vec<&'static str> {
    mount::templates(TABLE)
}

/// Registers `/scim/v2` (in the application, beside `/api/v1`).
pub(crate) fn register(cfg: &mut web::ServiceConfig) {
    let scope = mount::scope(PREFIX, TABLE, |allow| {
        ScimError::from(ApiError::MethodNotAllowed { allow })
    });
    cfg.service(scope.default_service(web::to(no_such_route)));
}

async fn no_such_route() -> Result<HttpResponse, ScimError> {
    Err(ScimError::not_found())
}

/// The gate of every request under [`PREFIX`] (the one middleware calls it: `pipeline.rs`):
/// authenticates and counts as `/api/v1` does, then requires `provision:scim`; refusals in
/// SCIM's shape; the rate-limit headers on every answer.
pub(crate) async fn gate(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let Some(state) = req.app_data::<web::Data<ApiState>>().cloned() else {
        return Ok(req
            .error_response(ScimError::from(ApiError::Internal))
            .map_into_right_body());
    };
    let admission = gate::authenticate_and_count(&req, &state, None).await;
    let mut refusal = admission.refusal.or_else(|| match &admission.principal {
        Some((principal, _)) if principal.has_scope(Scope::ProvisionScim) => None,
        Some(_) => Some(ApiError::InsufficientScope(Scope::ProvisionScim)),
        None => Some(ApiError::Unauthorized),
    });
    if let (None, Some((principal, _))) = (&refusal, &admission.principal)
        && writes(&req)
    {
        refusal = spend_write_budget(&state, principal.scope().customer_id())
            .await
            .err();
    }
    let mut response = match (refusal, admission.principal) {
        (Some(refusal), _) => req
            .error_response(ScimError::from(refusal))
            .map_into_right_body(),
        (None, principal) => {
            if let Some((principal, _)) = principal {
                req.extensions_mut().insert(principal);
            }
            next.call(req).await?.map_into_left_body()
        }
    };
    gate::write_rate_headers(&mut response, &admission.counted);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// Whether a request writes users or groups (a search is a read, however it is sent).
fn writes(req: &ServiceRequest) -> bool {
    use actix_web::http::Method;
    match *req.method() {
        Method::PUT | Method::PATCH | Method::DELETE => true,
        Method::POST => !req.path().ends_with("/.search"),
        _ => false,
    }
}

/// Counts a SCIM write against its customer's budget
/// (`posture_domain::scim::WRITE_RATE`): 429 past it.
async fn spend_write_budget(
    state: &ApiState,
    customer: posture_domain::CustomerId,
) -> Result<(), ApiError> {
    let bucket = posture_domain::rate_limit::RateBucket::CustomerScimWrites(customer);
    let decision = state.budgets.scim_writes.check(&bucket).await?;
    ApiError::over_budget(
        "SCIM writes are limited to 600 a minute per customer",
        bucket,
        decision,
    )
}

async fn discovery_config(req: HttpRequest) -> HttpResponse {
    answer(
        StatusCode::OK,
        &discovery::service_provider_config(&base(&req)),
        None,
    )
}

async fn resource_types(req: HttpRequest) -> HttpResponse {
    answer(
        StatusCode::OK,
        &discovery::resource_types(&base(&req)),
        None,
    )
}

async fn resource_type(req: HttpRequest, id: web::Path<String>) -> Result<HttpResponse, ScimError> {
    let body = discovery::resource_type(&id, &base(&req)).ok_or_else(ScimError::not_found)?;
    Ok(answer(StatusCode::OK, &body, None))
}

async fn schemas(req: HttpRequest) -> HttpResponse {
    answer(StatusCode::OK, &discovery::schemas(&base(&req)), None)
}

async fn schema(req: HttpRequest, id: web::Path<String>) -> Result<HttpResponse, ScimError> {
    let body = discovery::schema(&id, &base(&req)).ok_or_else(ScimError::not_found)?;
    Ok(answer(StatusCode::OK, &body, None))
}

/// A search of every resource type (`POST /.search`): the users, then the groups, paged
/// as one list. A filter applies to the types it can be read for (`userName` to users,
/// `members` to groups, `externalId` to both).
async fn search_all(
    req: HttpRequest,
    caller: Caller,
    state: web::Data<ApiState>,
    payload: web::Payload,
) -> Result<HttpResponse, ScimError> {
    let params = ListParams::of_search(&req, payload).await?;
    let (user_filter, group_filter) = match params.filter.as_deref() {
        None => (Some(None), Some(None)),
        Some(filter) => match (filter.parse::<UserFilter>(), filter.parse::<GroupFilter>()) {
            (Err(e), Err(_)) => return Err(e.into()),
            (users, groups) => (users.ok().map(Some), groups.ok().map(Some)),
        },
    };
    let window = params.window;
    let mut resources = Vec::new();
    let mut users_total = 0;
    if let Some(filter) = user_filter {
        let (users, total) = handlers::rendered::<Users>(
            &req,
            &caller,
            &state,
            filter.as_ref(),
            window,
            &params.shape,
        )
        .await?;
        users_total = total;
        resources = users;
    }
    let mut groups_total = 0;
    if let Some(filter) = group_filter {
        // The groups' part of the window: after the users, what the page has room for.
        let start = window.offset().saturating_sub(users_total) + 1;
        let room = u64::from(window.count).saturating_sub(resources.len() as u64);
        let groups_window = ListWindow::new(i64::try_from(start).ok(), i64::try_from(room).ok());
        let (groups, total) = handlers::rendered::<Groups>(
            &req,
            &caller,
            &state,
            filter.as_ref(),
            groups_window,
            &params.shape,
        )
        .await?;
        groups_total = total;
        if window.offset() + (resources.len() as u64) >= users_total {
            resources.extend(groups);
        }
    }
    let body = render::list(resources, users_total + groups_total, window.start_index);
    Ok(answer(StatusCode::OK, &body, None))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_route_table_has_no_faults() {
        assert_eq!(crate::mount::faults(super::TABLE), Vec::<String>::new());
    }
}
