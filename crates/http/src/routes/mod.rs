//! The route table: the single list from which the actix router and the OpenAPI document
//! are both built, so neither can have a route the other lacks.
//!
//! Each route is one [`Endpoint`], declared next to its handler: method, path (relative to
//! `/api/v1`), required scope, its typed inputs (path parameters, query parts, body), handler,
//! and what the contract says of it: how it answers conditional reads ([`Tagging`]) and
//! where it reads ([`ReadsFrom`]). Registration wraps every route in
//! [`check_scope_and_query`]: the scope check, then the query parsed by the declared parts.
//! Adding a route is adding an `Endpoint` to [`ENDPOINTS`] beside its handler; `cargo xtask
//! openapi` then shows the contract change.

mod deliveries;
mod events;
mod export;
mod findings;
mod identities;
mod keys;
mod openapi_json;
mod roles;
mod tenants;
mod triage;
mod upr;
mod webhooks;

use std::rc::Rc;

use actix_web::{
    HttpMessage as _, HttpResponse, Route,
    body::{BodySize, BoxBody, MessageBody as _},
    dev::{ServiceRequest, ServiceResponse},
    middleware::{Next, from_fn},
    web,
};
use schemars::{JsonSchema, Schema, SchemaGenerator};

pub use crate::auth::Access;
use crate::{
    auth::authorize,
    error::ApiError,
    input::{Body, PathParam, QueryPart, declared_names, parse_query},
};

/// Every route of the API, in registration order (a literal path before a templated one).
pub static ENDPOINTS: &[&Endpoint] = &[
    &identities::LIST,
    &identities::GET,
    &findings::LIST,
    &export::EXPORT,
    &triage::BULK,
    &findings::GET,
    &findings::PATCH,
    &findings::HISTORY,
    &roles::LIST,
    &upr::ROLLUP,
    &upr::PRINCIPALS,
    &upr::TREND,
    &tenants::LIST,
    &webhooks::CREATE,
    &webhooks::LIST,
    &webhooks::GET,
    &webhooks::PATCH,
    &webhooks::ROTATE_SECRET,
    &deliveries::LIST,
    &deliveries::GET,
    &deliveries::REDELIVER,
    &deliveries::RECOVER,
    &deliveries::TEST,
    &webhooks::DELETE,
    &events::LIST,
    &events::GET,
    &keys::CURRENT,
    &openapi_json::GET,
];

/// The prefix of every route.
pub const PREFIX: &str = "/api/v1";

/// An HTTP method of the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpMethod {
    Get,
    Post,
    Patch,
    Delete,
}

impl HttpMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Patch => "PATCH",
            HttpMethod::Delete => "DELETE",
        }
    }

    fn actix(self) -> actix_web::http::Method {
        match self {
            HttpMethod::Get => actix_web::http::Method::GET,
            HttpMethod::Post => actix_web::http::Method::POST,
            HttpMethod::Patch => actix_web::http::Method::PATCH,
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

/// A request header a route reads beyond the conditional ones (which `tagging` and
/// `if_match` declare), as the contract states it.
pub struct RequestHeader {
    pub name: &'static str,
    pub description: &'static str,
    pub schema: SchemaFn,
}

/// The `Idempotency-Key` request header of every idempotent route, as the contract states
/// it (`idempotency.rs` honours it).
pub(crate) static IDEMPOTENCY_KEY: RequestHeader = RequestHeader {
    name: "Idempotency-Key",
    description: "Makes a retry of this request safe (IETF httpapi idempotency-key draft): a \
                  unique value of yours (a UUID is best), 1 to 255 visible ASCII characters, \
                  as is or as a quoted string. The same key with the same request within 24 \
                  hours answers the first answer again, with `Idempotent-Replayed: true`, \
                  instead of acting twice; with another body or route it is a 422; while the \
                  first request runs, a 409. Keys are per API key. Answers that may differ \
                  when retried (409, 412, 429, 5xx) are not kept.",
    schema: key_schema,
};

fn key_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": 257,
        "pattern": r#"^(?:[!#-\[\]-~]{1,255}|"[!#-\[\]-~]{1,255}")$"#
    })
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

impl Success {
    /// A JSON body of type `T` with this status.
    pub const fn json<T: JsonSchema>(status: u16, description: &'static str) -> Self {
        Success::Json {
            status,
            description,
            schema: schema::<T>,
        }
    }
}

/// One route: how it is served and what the contract says of it. A static states what
/// differs from [`Endpoint::DEFAULT`].
pub struct Endpoint {
    pub method: HttpMethod,
    /// Relative to `/api/v1`, in the `{name}` template syntax actix and OpenAPI share.
    pub path: &'static str,
    /// Who may call it.
    pub access: Access,
    pub operation_id: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
    pub description: &'static str,
    /// The parameters of the path's `{...}` segments.
    pub path_params: &'static [&'static PathParam],
    /// The parts of the query string: every parameter the route accepts (any other is 400).
    pub query: &'static [QueryPart],
    /// Request headers it reads (beyond authentication and the conditional headers).
    pub request_headers: &'static [&'static RequestHeader],
    /// The JSON body it takes, if any.
    pub body: Option<Body>,
    pub success: Success,
    /// Error statuses of this route beyond those of every authenticated route
    /// (401, 403, 429, 500, 503).
    pub errors: &'static [u16],
    /// Headers of the success response beyond those of every response (names of
    /// `components.headers`).
    pub success_headers: &'static [&'static str],
    /// It takes `If-Match` with the resource's `ETag` (412 when it does not hold).
    pub if_match: bool,
    /// A POST that creates or acts: it takes `Idempotency-Key` (`idempotency.rs`), which
    /// the contract states with its 409 and 422 and the `Idempotent-Replayed` header.
    pub idempotent: bool,
    /// How it answers conditional reads.
    pub tagging: Tagging,
    /// Which database its reads may come from.
    pub reads: ReadsFrom,
    /// The actix route (without its method guard, which comes from `method`).
    pub handler: fn() -> Route,
}

impl Endpoint {
    /// What a route has unless its static says otherwise. `path`, `operation_id`, `tag`,
    /// `summary`, `description`, `success` and `handler` are always given (a test checks).
    pub const DEFAULT: Endpoint = Endpoint {
        method: HttpMethod::Get,
        path: "",
        access: Access::Public,
        operation_id: "",
        tag: "",
        summary: "",
        description: "",
        path_params: &[],
        query: &[],
        request_headers: &[],
        body: None,
        success: Success::NoContent { description: "" },
        errors: &[],
        success_headers: &[],
        if_match: false,
        idempotent: false,
        tagging: Tagging::None,
        reads: ReadsFrom::Primary,
        handler: web::route,
    };

    /// The full path, `/api/v1/...`.
    pub fn full_path(&self) -> String {
        format!("{PREFIX}{}", self.path)
    }

    /// Whether it answers conditional reads (`ETag`, `If-None-Match`, 304): through the
    /// gate, or by itself.
    pub fn is_conditional(&self) -> bool {
        self.tagging != Tagging::None
    }
}

/// How a route answers conditional reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tagging {
    /// No `ETag`: a write, a public route, or a read whose answer cannot be tagged before it
    /// is made (the export streams a snapshot too large to hold back; a key's description
    /// changes with its use, `lastUsedAt`, not with the customer's data).
    None,
    /// The gate tags the read with the customer's data version before the route runs, and
    /// answers `If-None-Match` with 304 itself (`conditional.rs`).
    DataVersion,
    /// The route tags its response itself with a strong tag that `If-Match` can use
    /// (`preconditions.rs`); the gate leaves it alone.
    ByRoute,
}

/// Which database a route's reads may come from (`reads.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadsFrom {
    /// The primary: what must see its own writes (webhooks, the caller's key).
    Primary,
    /// A read replica that keeps up, when one is configured: the analysed data, which only
    /// passes change.
    Replica,
}

/// Whether `path` matches `template` (a `{...}` segment matches any one segment).
fn matches_template(path: &str, template: &str) -> bool {
    let (mut path, mut template) = (path.split('/'), template.split('/'));
    loop {
        match (path.next(), template.next()) {
            (None, None) => return true,
            (Some(p), Some(t)) if p == t || (t.starts_with('{') && t.ends_with('}')) => {}
            _ => return false,
        }
    }
}

/// The endpoint a request reaches, as the router will choose it: the first of
/// [`ENDPOINTS`] (registration order: a literal path before a templated one) with its method
/// and a path its template matches.
pub(crate) fn endpoint_of(
    method: &actix_web::http::Method,
    path: &str,
) -> Option<&'static Endpoint> {
    let relative = path.strip_prefix(PREFIX)?;
    // HEAD is the GET of the same route without its body (its tag, its reads).
    let method = match *method {
        actix_web::http::Method::HEAD => &actix_web::http::Method::GET,
        _ => method,
    };
    ENDPOINTS
        .iter()
        .copied()
        .find(|e| e.method.actix() == method && matches_template(relative, e.path))
}

/// Whether `path` (a request path) is a public route.
pub(crate) fn is_public(path: &str) -> bool {
    ENDPOINTS
        .iter()
        .any(|e| e.access == Access::Public && path.strip_prefix(PREFIX) == Some(e.path))
}

/// Registers every endpoint in the `/api/v1` scope. Paths are registered once, with all
/// their methods, a GET with HEAD too (the same answer without its body, as HTTP tools and
/// caches expect); any other method gets 405 with `Allow`.
pub(crate) fn register(cfg: &mut web::ServiceConfig) {
    let mut paths: Vec<&'static str> = Vec::new();
    for endpoint in ENDPOINTS {
        if !paths.contains(&endpoint.path) {
            paths.push(endpoint.path);
        }
    }
    for path in paths {
        // A literal path (`/findings/triage`) also matches the templated paths of other
        // methods (`/findings/{id}` for a finding whose id is `triage`), and actix gives a
        // request to the first resource whose path matches: the routes it shadows answer
        // on its resource too, their parameters taken from the path.
        let shadowed = |e: &&Endpoint| {
            !path.contains('{')
                && e.path != path
                && matches_template(path, e.path)
                && ENDPOINTS
                    .iter()
                    .all(|o| o.path != path || o.method != e.method)
        };
        let endpoints: Vec<&Endpoint> = ENDPOINTS
            .iter()
            .copied()
            .filter(|e| e.path == path || shadowed(e))
            .collect();
        // `Allow` names the methods the contract gives this path: a finding whose id is
        // `triage` is reachable here, but clients read the path's own operations.
        let mut allowed = Vec::new();
        for endpoint in endpoints.iter().filter(|e| e.path == path) {
            allowed.push(endpoint.method.as_str());
            if endpoint.method == HttpMethod::Get {
                allowed.push("HEAD");
            }
        }
        let allow = allowed.join(", ");
        let mut resource = web::resource(path);
        for endpoint in endpoints {
            let names: Rc<[String]> = declared_names(endpoint.query).into();
            let mut methods = vec![endpoint.method.actix()];
            if endpoint.method == HttpMethod::Get {
                methods.push(actix_web::http::Method::HEAD);
            }
            for method in methods {
                let names = names.clone();
                let route = (endpoint.handler)().method(method).wrap(from_fn(
                    move |mut req: ServiceRequest, next| {
                        if endpoint.path != path {
                            for (value, name) in path.split('/').zip(endpoint.path.split('/')) {
                                if let Some(name) =
                                    name.strip_prefix('{').and_then(|n| n.strip_suffix('}'))
                                {
                                    req.match_info_mut().add_static(name, value);
                                }
                            }
                        }
                        check_scope_and_query(endpoint, names.clone(), req, next)
                    },
                ));
                resource = resource.route(route);
            }
        }
        resource = resource.default_service(web::to(move || {
            let allow = allow.clone();
            async move { Err::<HttpResponse, _>(ApiError::MethodNotAllowed { allow }) }
        }));
        cfg.service(resource);
    }
}

/// Per-route middleware built from the table: the caller must hold the route's scope, and
/// the query string must be one the route declares (parsed here, once, for the handler).
async fn check_scope_and_query(
    endpoint: &'static Endpoint,
    names: Rc<[String]>,
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let admitted = authorize(&req, endpoint.access).and_then(|()| {
        parse_query(
            req.query_string(),
            endpoint.query,
            &names,
            &mut req.extensions_mut(),
        )
    });
    let head = req.method() == actix_web::http::Method::HEAD;
    let response = match admitted {
        Ok(()) if endpoint.idempotent => crate::idempotency::admit(req, next).await?,
        Ok(()) => next.call(req).await?,
        Err(e) => req.error_response(e),
    };
    // A HEAD sends no body: a streamed one (an export, a stream of events) is dropped
    // unread, which ends the work producing it. A body of known size is left to the
    // server, which sends its `Content-Length` and not its bytes.
    // The GET's streamed body would have been compressed as the request's
    // `Accept-Encoding` asks (not a stream of events), so the HEAD says it varies with it too,
    // as caches need.
    if head && matches!(response.response().body().size(), BodySize::Stream) {
        return Ok(response.map_body(|head, _| {
            let events = head
                .headers()
                .get(actix_web::http::header::CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
            if !events {
                head.headers_mut().append(
                    actix_web::http::header::VARY,
                    actix_web::http::header::HeaderValue::from_static("accept-encoding"),
                );
            }
            BoxBody::new(actix_web::body::None::new())
        }));
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use actix_web::http::Method;

    use super::*;

    #[test]
    fn only_authenticated_reads_are_tagged_or_read_from_a_replica() {
        for endpoint in ENDPOINTS {
            let read = endpoint.method == HttpMethod::Get && endpoint.access != Access::Public;
            assert!(
                read || (endpoint.tagging == Tagging::None && endpoint.reads == ReadsFrom::Primary),
                "{} {}: only an authenticated GET takes a tag or a replica",
                endpoint.method.as_str(),
                endpoint.path
            );
        }
    }

    #[test]
    fn every_post_takes_an_idempotency_key_and_nothing_else_does() {
        for endpoint in ENDPOINTS {
            assert_eq!(
                endpoint.idempotent,
                endpoint.method == HttpMethod::Post,
                "{}: a POST creates or acts, so a retry must be safe",
                endpoint.operation_id
            );
        }
    }

    #[test]
    fn a_request_reaches_the_endpoint_the_router_chooses() {
        let of = |method: Method, path: &str| endpoint_of(&method, path).map(|e| e.operation_id);
        assert_eq!(
            of(Method::GET, "/api/v1/findings/export"),
            Some("exportFindings")
        );
        assert_eq!(of(Method::GET, "/api/v1/findings/f-1"), Some("getFinding"));
        assert_eq!(
            of(Method::GET, "/api/v1/webhooks/abc/deliveries"),
            Some("listWebhookDeliveries")
        );
        assert_eq!(
            of(Method::DELETE, "/api/v1/webhooks/abc"),
            Some("deleteWebhook")
        );
        assert_eq!(of(Method::PUT, "/api/v1/webhooks/abc"), None);
        assert_eq!(of(Method::GET, "/api/v1/findings/f-1/more"), None);
        assert_eq!(of(Method::GET, "/api/v1findings"), None);
        assert_eq!(of(Method::GET, "/metrics"), None);
    }
}
