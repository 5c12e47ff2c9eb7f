//! SCIM 2.0 at `/scim/v2` (RFC 7644): customers' identity providers provision the users and
//! groups of the customer's console with a key holding `provision:scim`.
//!
//! The gate is the API's (a key, its rate limit and its customer's budget), then the scope:
//! without `provision:scim` a key gets 403 here. Every answer, errors included, is
//! `application/scim+json`; a body is JSON (`application/scim+json` or `application/json`)
//! of at most [`MAX_BODY_BYTES`]. `discovery.rs` describes the service, `users.rs` and
//! `groups.rs` serve the resources, `render.rs` shows them, `error.rs` answers errors.

mod discovery;
mod error;
mod groups;
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
    middleware::{Next, from_fn},
    web,
};
use futures_util::StreamExt as _;
use posture_domain::{
    Scope,
    scim::{GroupFilter, ListWindow, UserFilter},
};
use serde_json::Value;

pub(crate) use self::error::ScimError;
use crate::{auth::Caller, error::ApiError, gate, state::ApiState};

/// Where SCIM is served.
pub const PREFIX: &str = "/scim/v2";
/// SCIM's route templates under [`PREFIX`]: what the access log and the metrics name its
/// requests by (the metrics test checks every route label is a template).
pub const ROUTES: &[&str] = &[
    "/ServiceProviderConfig",
    "/ResourceTypes",
    "/ResourceTypes/{id}",
    "/Schemas",
    "/Schemas/{id}",
    "/.search",
    "/Users",
    "/Users/.search",
    "/Users/{id}",
    "/Groups",
    "/Groups/.search",
    "/Groups/{id}",
];
/// Largest SCIM request body (a group's creation or a PATCH naming up to 1,000 members).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Registers `/scim/v2` (in the application, beside `/api/v1`).
pub(crate) fn register(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope(PREFIX)
            .wrap(from_fn(scim_gate))
            .service(
                resource("/ServiceProviderConfig", "GET").route(web::get().to(discovery_config)),
            )
            .service(resource("/ResourceTypes", "GET").route(web::get().to(resource_types)))
            .service(resource("/ResourceTypes/{id}", "GET").route(web::get().to(resource_type)))
            .service(resource("/Schemas", "GET").route(web::get().to(schemas)))
            .service(resource("/Schemas/{id}", "GET").route(web::get().to(schema)))
            .service(resource("/.search", "POST").route(web::post().to(search_all)))
            .configure(users::register)
            .configure(groups::register)
            .default_service(web::to(no_such_route)),
    );
}

/// A resource whose other methods are answered 405 in SCIM's shape, with `Allow`.
pub(crate) fn resource(path: &str, allow: &'static str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(move || async move {
        Err::<HttpResponse, _>(ScimError::from(ApiError::MethodNotAllowed {
            allow: allow.to_owned(),
        }))
    }))
}

async fn no_such_route() -> Result<HttpResponse, ScimError> {
    Err(ScimError::not_found())
}

/// Authenticates and counts as `/api/v1` does, then requires `provision:scim`; refusals in
/// SCIM's shape; the rate-limit headers on every answer.
async fn scim_gate(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let Some(state) = req.app_data::<web::Data<ApiState>>().cloned() else {
        return Ok(req
            .error_response(ScimError::from(ApiError::Internal))
            .map_into_right_body());
    };
    let admission = gate::authenticate_and_count(&req, &state).await;
    let refusal = admission.refusal.or_else(|| match &admission.principal {
        Some((principal, _)) if principal.has_scope(Scope::ProvisionScim) => None,
        Some(_) => Some(ApiError::InsufficientScope(Scope::ProvisionScim)),
        None => Some(ApiError::Unauthorized),
    });
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
    if let Some(decision) = &admission.counted.decision {
        gate::set_headers(response.headers_mut(), &admission.counted.bucket, decision);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The service's URL up to `/scim/v2`, as the client reached it (forwarding headers
/// believed from the trusted proxies only).
pub(crate) fn base(req: &HttpRequest) -> String {
    let trusted = req
        .app_data::<web::Data<ApiState>>()
        .map(|state| state.trusted_proxies.clone())
        .unwrap_or_default();
    let (scheme, host) = crate::client_ip::request_origin(req, &trusted);
    format!("{scheme}://{host}{PREFIX}")
}

/// An answer with a SCIM body; `version` sets the `ETag`.
pub(crate) fn answer(status: StatusCode, body: &Value, version: Option<u64>) -> HttpResponse {
    let mut response = HttpResponse::build(status);
    response.content_type(error::CONTENT_TYPE);
    if let Some(tag) = version.and_then(|v| HeaderValue::from_str(&render::etag(v)).ok()) {
        response.insert_header((header::ETAG, tag));
    }
    if status == StatusCode::CREATED
        && let Some(location) = body["meta"]["location"]
            .as_str()
            .and_then(|l| HeaderValue::from_str(l).ok())
    {
        response.insert_header((header::LOCATION, location));
    }
    response.body(body.to_string())
}

/// The version `If-Match` names: `None` without the header or with `*`; a tag that is not
/// one of posture's matches no version (`Some(0)`: versions start at 1).
pub(crate) fn if_match(req: &HttpRequest) -> Option<u64> {
    let value = req
        .headers()
        .get(header::IF_MATCH)?
        .to_str()
        .unwrap_or("\"\"");
    let first = value.split(',').next().unwrap_or_default().trim();
    if first == "*" {
        return None;
    }
    Some(tag_version(first).unwrap_or(0))
}

/// The 304 of a GET whose `If-None-Match` holds the resource's tag, with the tag.
pub(crate) fn unchanged(version: u64) -> HttpResponse {
    let mut response = HttpResponse::NotModified();
    if let Ok(tag) = HeaderValue::from_str(&render::etag(version)) {
        response.insert_header((header::ETAG, tag));
    }
    response.finish()
}

/// Whether `If-None-Match` holds the resource's tag (a GET is then answered 304).
pub(crate) fn not_modified(req: &HttpRequest, version: u64) -> bool {
    req.headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|t| t.trim() == "*" || tag_version(t.trim()) == Some(version))
        })
}

fn tag_version(tag: &str) -> Option<u64> {
    let tag = tag.strip_prefix("W/").unwrap_or(tag);
    tag.strip_prefix('"')?.strip_suffix('"')?.parse().ok()
}

/// A request's JSON body, read up to [`MAX_BODY_BYTES`].
pub(crate) async fn json_body(
    req: &HttpRequest,
    mut payload: web::Payload,
) -> Result<Value, ScimError> {
    if let Some(kind) = req.headers().get(header::CONTENT_TYPE) {
        let kind = kind.to_str().unwrap_or_default().to_ascii_lowercase();
        let essence = kind.split(';').next().unwrap_or_default().trim();
        if essence != "application/json" && essence != "application/scim+json" {
            return Err(ApiError::UnsupportedMediaType(
                "a SCIM body is application/scim+json or application/json".to_owned(),
            )
            .into());
        }
    }
    let too_large = || {
        ScimError::from(ApiError::PayloadTooLarge(format!(
            "a SCIM body is at most {MAX_BODY_BYTES} bytes"
        )))
    };
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if announced.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(too_large());
    }
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk
            .map_err(|_| ScimError::bad_request("invalidSyntax", "the body could not be read"))?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| {
        ScimError::bad_request(
            "invalidSyntax",
            format!(
                "the body is not JSON (line {}, column {})",
                e.line(),
                e.column()
            ),
        )
    })
}

/// Which attributes an answer shows (`attributes`, `excludedAttributes`: RFC 7644 §3.9).
#[derive(Default)]
pub(crate) struct Shape {
    attributes: Vec<String>,
    excluded: Vec<String>,
}

impl Shape {
    fn new(attributes: Vec<String>, excluded: Vec<String>) -> Self {
        Self {
            attributes,
            excluded,
        }
    }

    /// Whether the request names the attributes it wants.
    pub(crate) fn asks(&self) -> bool {
        !self.attributes.is_empty()
    }

    /// Whether a group's members are shown (they cost a read: not when left out).
    pub(crate) fn members(&self) -> bool {
        let names_members = |list: &[String]| {
            list.iter()
                .any(|a| a == "members" || a.starts_with("members."))
        };
        !self.excluded.iter().any(|a| a == "members")
            && (self.attributes.is_empty() || names_members(&self.attributes))
    }

    /// The resource as the request asks to see it.
    pub(crate) fn apply(&self, mut resource: Value) -> Value {
        render::project(&mut resource, &self.attributes, &self.excluded);
        resource
    }
}

/// The list parameters (RFC 7644 §3.4.2), from the query string (names in any case;
/// others ignored) or a search's body.
pub(crate) struct ListParams {
    pub(crate) filter: Option<String>,
    pub(crate) window: ListWindow,
    pub(crate) shape: Shape,
}

/// A query string's parameters.
struct Query(Vec<(String, String)>);

impl Query {
    fn of(req: &HttpRequest) -> Result<Self, ScimError> {
        serde_urlencoded::from_str(req.query_string())
            .map(Self)
            .map_err(|_| ScimError::bad_request("invalidValue", "the query string is malformed"))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn number(&self, name: &'static str) -> Result<Option<i64>, ScimError> {
        self.get(name)
            .map(|v| {
                v.trim().parse::<i64>().map_err(|_| {
                    ScimError::bad_request("invalidValue", format!("{name} is an integer"))
                })
            })
            .transpose()
    }

    fn shape(&self) -> Shape {
        Shape::new(
            render::attribute_list(self.get("attributes")),
            render::attribute_list(self.get("excludedAttributes")),
        )
    }
}

/// The `attributes`/`excludedAttributes` of a request's query string.
pub(crate) fn shape_of(req: &HttpRequest) -> Result<Shape, ScimError> {
    Ok(Query::of(req)?.shape())
}

impl ListParams {
    pub(crate) fn of(req: &HttpRequest) -> Result<Self, ScimError> {
        let query = Query::of(req)?;
        Ok(Self {
            filter: query.get("filter").map(str::to_owned),
            window: ListWindow::new(query.number("startIndex")?, query.number("count")?),
            shape: query.shape(),
        })
    }

    /// A search's body (`POST .search`, RFC 7644 §3.4.3).
    pub(crate) async fn of_search(
        req: &HttpRequest,
        payload: web::Payload,
    ) -> Result<Self, ScimError> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Search {
            #[serde(default)]
            attributes: Vec<String>,
            #[serde(default)]
            excluded_attributes: Vec<String>,
            filter: Option<String>,
            start_index: Option<i64>,
            count: Option<i64>,
        }
        let search: Search = serde_json::from_value(json_body(req, payload).await?)
            .map_err(|e| ScimError::bad_request("invalidSyntax", format!("a search body: {e}")))?;
        Ok(Self {
            filter: search.filter,
            window: ListWindow::new(search.start_index, search.count),
            shape: Shape::new(
                render::attribute_list(search.attributes.iter().map(String::as_str)),
                render::attribute_list(search.excluded_attributes.iter().map(String::as_str)),
            ),
        })
    }
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
    let base = base(&req);
    let window = params.window;
    let mut resources = Vec::new();
    let mut users_total = 0;
    if let Some(filter) = user_filter {
        let page = users::page(&caller, &state, filter.as_ref(), window).await?;
        users_total = page.total;
        resources.extend(
            page.resources
                .iter()
                .map(|u| params.shape.apply(render::user(u, &base))),
        );
    }
    let mut groups_total = 0;
    if let Some(filter) = group_filter {
        // The groups' part of the window: after the users, what the page has room for.
        let start = window.offset().saturating_sub(users_total) + 1;
        let room = u64::from(window.count).saturating_sub(resources.len() as u64);
        let groups = ListParams {
            filter: None,
            window: ListWindow::new(i64::try_from(start).ok(), i64::try_from(room).ok()),
            shape: Shape::new(
                params.shape.attributes.clone(),
                params.shape.excluded.clone(),
            ),
        };
        let page = groups::page(&caller, &state, filter.as_ref(), &groups).await?;
        groups_total = page.total;
        if window.offset() + (resources.len() as u64) >= users_total {
            resources.extend(
                page.resources
                    .iter()
                    .map(|g| params.shape.apply(render::group(g, &base))),
            );
        }
    }
    let body = render::list(resources, users_total + groups_total, window.start_index);
    Ok(answer(StatusCode::OK, &body, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_shown_unless_left_out() {
        let shape = |attributes: &str, excluded: &str| {
            Shape::new(
                render::attribute_list([attributes]),
                render::attribute_list([excluded]),
            )
            .members()
        };
        assert!(shape("", ""));
        assert!(!shape("", "members"));
        assert!(!shape("", "displayName, Members"));
        assert!(!shape("displayName", ""));
        assert!(shape("displayName,members.value", ""));
        assert!(shape("", "externalId"));
    }

    #[test]
    fn tags_are_read_weak_or_strong() {
        assert_eq!(tag_version("W/\"3\""), Some(3));
        assert_eq!(tag_version("\"3\""), Some(3));
        assert_eq!(tag_version("3"), None);
        assert_eq!(tag_version("W/\"x\""), None);
    }
}
