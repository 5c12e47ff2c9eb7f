//! The route table: the single list from which the actix router and the OpenAPI document
//! are both built, so neither can have a route the other lacks.
//!
//! Each route is one [`Endpoint`], declared next to its handler: method, path (relative to
//! `/api/v1`), required scope, its handler (whose argument and return types are its typed
//! inputs — path parameters, query parts, body — and its success answer: `handler.rs`), and
//! what the contract says of it: how it answers conditional reads ([`Tagging`]) and where it
//! reads ([`ReadsFrom`]). The one middleware of every request (`pipeline.rs`) finds the
//! request's route in the table once ([`route_of`]); the gate admits the caller, then
//! [`serve`] checks the route's scope and parses the query by the parts its handler reads.
//! Adding a route is adding an `Endpoint` to [`ENDPOINTS`] beside its handler; `cargo xtask
//! openapi` then shows the contract change.

mod audit;
mod deliveries;
mod endpoint;
mod events;
mod export;
mod findings;
mod identities;
mod keys;
mod openapi_json;
mod roles;
mod table;
mod tenants;
mod triage;
mod upr;
mod webhooks;

use actix_web::{
    HttpMessage as _, HttpResponse, Resource,
    body::{BodySize, BoxBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    middleware::{Next, from_fn},
    web,
};

pub use crate::answer::{Answer, Answers, Built, Content, NoContent, Reply, SchemaFn, schema};
pub use crate::auth::Access;
pub use crate::handler::{Arguments, Declares, Handler, route_to};
use posture_domain::Principal;

use crate::{auth::authorize, error::ApiError, input::parse_query, reads::Reads};
pub(crate) use endpoint::IDEMPOTENCY_KEY;
pub use endpoint::{Endpoint, HttpMethod, PREFIX, ReadsFrom, RequestHeader, Tagging};
pub use table::ENDPOINTS;
pub(crate) use table::{Routed, is_public, route_of};
use table::{first_segment, matches_template};

/// Registers every endpoint in the `/api/v1` scope. Paths are registered once, with all
/// their methods, a GET with HEAD too (the same answer without its body, as HTTP tools and
/// caches expect); any other method gets 405 with `Allow`.
///
/// Each collection's paths are a scope of their own (`/findings`: `""`, `/{id}`, ...):
/// actix-web tries a scope's resources in turn, each template with a regular expression, so
/// a request tries only its collection's, not every template before it in the table.
pub(crate) fn register(cfg: &mut web::ServiceConfig) {
    let mut collections: Vec<(&'static str, Vec<Resource>)> = Vec::new();
    for (path, resource) in resources() {
        let (collection, _) = in_collection(path);
        if collection.is_empty() {
            cfg.service(resource);
            continue;
        }
        match collections.iter_mut().find(|(c, _)| *c == collection) {
            Some((_, resources)) => resources.push(resource),
            None => collections.push((collection, vec![resource])),
        }
    }
    for (collection, resources) in collections {
        let scope = resources
            .into_iter()
            .fold(web::scope(collection), |scope, resource| {
                scope.service(resource)
            })
            // A path under the collection that no template matches (`/findings/a/b`).
            .default_service(web::to(crate::error::not_found));
        cfg.service(scope);
    }
}

/// A path's collection and the rest of it: `/findings/{id}` → (`/findings`, `/{id}`),
/// `/findings` → (`/findings`, `""`); the root, `""`, is in none.
fn in_collection(path: &'static str) -> (&'static str, &'static str) {
    let segment = first_segment(path);
    path.split_at(if segment.is_empty() {
        0
    } else {
        1 + segment.len()
    })
}

/// One resource per path of the table, in the table's order, its path relative to its
/// collection (`/findings/{id}` → `/{id}`; `/findings` → `""`).
fn resources() -> Vec<(&'static str, Resource)> {
    let mut resources = Vec::new();
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
        let mut resource = web::resource(in_collection(path).1);
        for endpoint in endpoints {
            let mut methods = vec![endpoint.method.actix()];
            if endpoint.method == HttpMethod::Get {
                methods.push(actix_web::http::Method::HEAD);
            }
            for method in methods {
                let route = (endpoint.handler.route)().method(method);
                // A shadowed route's parameters, from the literal path it answers on.
                let route = match endpoint.path == path {
                    true => route,
                    false => route.wrap(from_fn(
                        move |mut req: ServiceRequest, next: Next<BoxBody>| {
                            for (value, name) in path.split('/').zip(endpoint.path.split('/')) {
                                if let Some(name) =
                                    name.strip_prefix('{').and_then(|n| n.strip_suffix('}'))
                                {
                                    req.match_info_mut().add_static(name, value);
                                }
                            }
                            next.call(req)
                        },
                    )),
                };
                resource = resource.route(route);
            }
        }
        resource = resource.default_service(web::to(move || {
            let allow = allow.clone();
            async move { Err::<HttpResponse, _>(ApiError::MethodNotAllowed { allow }) }
        }));
        resources.push((path, resource));
    }
    resources
}

/// The route's own admission, for a caller the gate admitted (`gate.rs`): the caller must
/// hold the route's scope, and the query string must be one the route declares (parsed
/// here, once, for the handler); an idempotent route's key is honoured (`idempotency.rs`).
/// Then the route runs (the router finds it), its caller in the request's extensions: only
/// a route checked here has one.
pub(crate) async fn serve<B: MessageBody + 'static>(
    route: &'static Routed,
    caller: Option<(Principal, Reads)>,
    req: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let endpoint = route.endpoint;
    let admitted = authorize(caller.as_ref().map(|(p, _)| p), endpoint.access).and_then(|()| {
        let mut extensions = req.extensions_mut();
        if let Some((principal, reads)) = caller {
            extensions.insert(principal);
            extensions.insert(reads);
        }
        parse_query(
            req.query_string(),
            &route.parts,
            &route.names,
            &mut extensions,
        )
    });
    let head = req.method() == actix_web::http::Method::HEAD;
    let response = match admitted {
        Ok(()) if endpoint.idempotent => crate::idempotency::admit(req, next).await?,
        Ok(()) => next.call(req).await?.map_into_boxed_body(),
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
    use super::*;
    use crate::input::declared_names;

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
    fn no_two_arguments_of_a_handler_read_the_same_parameter() {
        for endpoint in ENDPOINTS {
            let names = declared_names(&endpoint.query_parts());
            let mut distinct = names.clone();
            distinct.sort();
            distinct.dedup();
            assert_eq!(names.len(), distinct.len(), "{}", endpoint.operation_id);
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
}
