//! The route table: the single list from which the actix router and the OpenAPI document
//! are both built, so neither can have a route the other lacks.
//!
//! Each route is one [`Endpoint`], declared next to its handler: method, path (relative to
//! `/api/v1`), required scope, handler, and what the contract says of it. Adding a route is
//! adding an `Endpoint` to [`ENDPOINTS`]; `cargo xtask openapi` then shows the contract
//! change.

mod export;
mod findings;
mod identities;
mod openapi_json;
mod roles;
mod tenants;
mod upr;
mod webhooks;

use actix_web::{HttpResponse, Route, middleware::from_fn, web};
use posture_domain::{
    CloudTenantId, CustomerScope, Error, Page, PageRequest, Scope, tenant::Tenant,
};
use posture_wire::{ListMeta, ListResponse};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;

use crate::{auth::require_scope, error::ApiError, state::ApiState};

/// Every route of the API, in registration order (a literal path before a templated one).
pub static ENDPOINTS: &[&Endpoint] = &[
    &identities::LIST,
    &identities::GET,
    &findings::LIST,
    &export::EXPORT,
    &findings::GET,
    &roles::LIST,
    &upr::ROLLUP,
    &upr::PRINCIPALS,
    &upr::TREND,
    &tenants::LIST,
    &webhooks::CREATE,
    &webhooks::LIST,
    &webhooks::GET,
    &webhooks::DELETE,
    &openapi_json::GET,
];

/// The prefix of every route.
pub const PREFIX: &str = "/api/v1";

/// An HTTP method of the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpMethod {
    Get,
    Post,
    Delete,
}

impl HttpMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Delete => "DELETE",
        }
    }

    fn actix(self) -> actix_web::http::Method {
        match self {
            HttpMethod::Get => actix_web::http::Method::GET,
            HttpMethod::Post => actix_web::http::Method::POST,
            HttpMethod::Delete => actix_web::http::Method::DELETE,
        }
    }
}

/// A function giving a JSON Schema (registering named schemas in the generator).
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// The schema of a wire type.
pub fn schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// Where a parameter is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamIn {
    Query,
    Path,
}

/// A query or path parameter.
pub struct Param {
    pub name: &'static str,
    pub location: ParamIn,
    pub required: bool,
    pub description: &'static str,
    pub schema: SchemaFn,
    /// Several values as one comma-separated value (`style: form, explode: false`).
    pub comma_list: bool,
}

/// A request body.
pub struct Body {
    pub description: &'static str,
    pub schema: SchemaFn,
}

/// What a route answers when it succeeds.
pub enum Success {
    /// A JSON body.
    Json {
        status: u16,
        description: &'static str,
        schema: SchemaFn,
    },
    /// 204 without a body.
    NoContent { description: &'static str },
    /// A body in one of several media types (the export).
    Media {
        status: u16,
        description: &'static str,
        content: &'static [(&'static str, SchemaFn)],
    },
}

/// One route: how it is served and what the contract says of it.
pub struct Endpoint {
    pub method: HttpMethod,
    /// Relative to `/api/v1`, in the `{name}` template syntax actix and OpenAPI share.
    pub path: &'static str,
    /// The scope a key needs; `None` for a public route.
    pub scope: Option<Scope>,
    pub operation_id: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
    pub description: &'static str,
    pub params: &'static [&'static Param],
    /// The JSON body it takes, if any.
    pub body: Option<Body>,
    pub success: Success,
    /// Error statuses of this route beyond those of every authenticated route
    /// (401, 403, 429, 500, 503).
    pub errors: &'static [u16],
    /// Headers of the success response beyond those of every response (names of
    /// `components.headers`).
    pub success_headers: &'static [&'static str],
    /// The actix route (without its method guard, which comes from `method`).
    pub handler: fn() -> Route,
}

impl Endpoint {
    /// The full path, `/api/v1/...`.
    pub fn full_path(&self) -> String {
        format!("{PREFIX}{}", self.path)
    }
}

/// Whether `path` (a request path) is a public route.
pub(crate) fn is_public(path: &str) -> bool {
    ENDPOINTS
        .iter()
        .any(|e| e.scope.is_none() && path.strip_prefix(PREFIX) == Some(e.path))
}

/// Registers every endpoint in the `/api/v1` scope. Paths are registered once, with all
/// their methods; any other method gets 405 with `Allow`.
pub(crate) fn register(cfg: &mut web::ServiceConfig) {
    let mut paths: Vec<&'static str> = Vec::new();
    for endpoint in ENDPOINTS {
        if !paths.contains(&endpoint.path) {
            paths.push(endpoint.path);
        }
    }
    for path in paths {
        let endpoints: Vec<&Endpoint> = ENDPOINTS
            .iter()
            .copied()
            .filter(|e| e.path == path)
            .collect();
        let allow = endpoints
            .iter()
            .map(|e| e.method.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let mut resource = web::resource(path);
        for endpoint in endpoints {
            let mut route = (endpoint.handler)().method(endpoint.method.actix());
            if let Some(scope) = endpoint.scope {
                route = route.wrap(from_fn(move |req, next| require_scope(scope, req, next)));
            }
            resource = resource.route(route);
        }
        resource = resource.default_service(web::to(move || {
            let allow = allow.clone();
            async move { Err::<HttpResponse, _>(ApiError::MethodNotAllowed { allow }) }
        }));
        cfg.service(resource);
    }
}

// Parameters shared by list routes.

fn limit_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "integer", "minimum": 1, "default": 100,
        "x-clamped-maximum": 500,
        "description": "Page size. Values above 500 are clamped to 500 (not rejected)."
    })
}

fn offset_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "integer", "minimum": 0, "default": 0 })
}

fn tenant_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "uuid" })
}

fn id_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[A-Za-z0-9._~:@-]+$" })
}

pub static LIMIT: Param = Param {
    name: "limit",
    location: ParamIn::Query,
    required: false,
    description: "Rows per page: default 100; above 500 it is clamped to 500, never rejected.",
    schema: limit_schema,
    comma_list: false,
};

pub static OFFSET: Param = Param {
    name: "offset",
    location: ParamIn::Query,
    required: false,
    description: "Zero-based index of the first row.",
    schema: offset_schema,
    comma_list: false,
};

pub static TENANT: Param = Param {
    name: "tenant",
    location: ParamIn::Query,
    required: false,
    description: "Restrict to one connected tenant (its cloudTenantId). An unknown tenant, or \
                  one of another customer, is 404. `meta.tenant` echoes the resolved id.",
    schema: tenant_schema,
    comma_list: false,
};

pub static ID: Param = Param {
    name: "id",
    location: ParamIn::Path,
    required: true,
    description: "The resource's id.",
    schema: id_schema,
    comma_list: false,
};

/// Resolves the `tenant` filter to one of the caller's tenants: an unknown or foreign tenant
/// is 404 (never 403, so a foreign tenant is not confirmed).
pub(crate) async fn resolve_tenant(
    state: &ApiState,
    scope: CustomerScope,
    raw: Option<String>,
) -> Result<Option<Tenant>, ApiError> {
    const NOT_FOUND: ApiError = ApiError::NotFound(Some("tenant not found"));
    let Some(raw) = raw else { return Ok(None) };
    if raw.is_empty() {
        return Err(ApiError::invalid("tenant must not be empty"));
    }
    let id: CloudTenantId = raw.parse().map_err(|_| NOT_FOUND)?;
    match state.ports.tenants.find_tenant(scope, id).await {
        Ok(tenant) => Ok(Some(tenant)),
        Err(Error::NotFound) => Err(NOT_FOUND),
        Err(e) => Err(e.into()),
    }
}

/// The `tenant` filter of a list or roll-up: the id of one of the caller's tenants (see
/// [`resolve_tenant`]), or none when the request names no tenant.
pub(crate) async fn tenant_filter(
    state: &ApiState,
    scope: CustomerScope,
    raw: Option<String>,
) -> Result<Option<CloudTenantId>, ApiError> {
    Ok(resolve_tenant(state, scope, raw)
        .await?
        .map(|tenant| tenant.cloud_tenant_id))
}

/// A list response: `{data, meta}`.
pub(crate) fn list_response<T: Serialize>(
    page: Page<T>,
    request: PageRequest,
    tenant: Option<CloudTenantId>,
) -> HttpResponse {
    // Sized for the page up front: growing a buffer of tens of KiB by doubling copies it
    // several times over.
    let mut body = Vec::with_capacity(256 + page.items.len() * LIST_ITEM_BYTES);
    let list = ListResponse {
        data: page.items,
        meta: ListMeta {
            total: page.total,
            limit: request.limit(),
            offset: request.offset(),
            tenant: tenant.map(|t| t.to_string()),
        },
    };
    match serde_json::to_writer(&mut body, &list) {
        Ok(()) => HttpResponse::Ok()
            .content_type(actix_web::http::header::ContentType::json())
            .body(body),
        Err(e) => {
            tracing::error!(error = %e, "serialising a list failed");
            actix_web::ResponseError::error_response(&ApiError::Internal)
        }
    }
}

/// About the size of one serialised list item (a finding is 400-600 bytes).
const LIST_ITEM_BYTES: usize = 640;
