//! The route table, and the request's route found in it once: [`ENDPOINTS`] in
//! registration order, and [`route_of`], which finds the endpoint a request reaches as the
//! router will choose it without trying every template: the table is indexed by the path's
//! first segment (every template's first segment is literal; a test checks), so a request
//! tries the few routes of its collection (at most nine, `/webhooks`), and what each request
//! needs of its route (its query parts and their names, its metric label) is computed once.

use std::{collections::HashMap, sync::LazyLock};

use actix_web::http::Method;

use super::{
    audit, deliveries, endpoint::Endpoint, endpoint::PREFIX, events, export, findings, identities,
    keys, openapi_json, roles, tenants, triage, upr, webhooks,
};
use crate::{
    auth::Access,
    input::{QueryPart, declared_names},
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
    &audit::LIST,
    &audit::EXPORT,
    &openapi_json::GET,
];

/// An endpoint with what serving a request of it needs, computed once.
pub(crate) struct Routed {
    pub(crate) endpoint: &'static Endpoint,
    /// `/api/v1/...`: the route's metric label and log field.
    pub(crate) full_path: String,
    /// The query parts its handler reads, and the names of their parameters.
    pub(crate) parts: Vec<QueryPart>,
    pub(crate) names: Vec<String>,
}

struct Table {
    routes: Vec<Routed>,
    /// The indexes in `routes` of each first path segment's routes, in registration order.
    by_first: HashMap<&'static str, Vec<usize>>,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    let mut by_first: HashMap<&'static str, Vec<usize>> = HashMap::new();
    let routes = ENDPOINTS
        .iter()
        .enumerate()
        .map(|(i, &endpoint)| {
            by_first
                .entry(first_segment(endpoint.path))
                .or_default()
                .push(i);
            let parts = endpoint.query_parts();
            Routed {
                endpoint,
                full_path: endpoint.full_path(),
                names: declared_names(&parts),
                parts,
            }
        })
        .collect();
    Table { routes, by_first }
});

/// The first segment of a path relative to `/api/v1` (`/findings/f-1` → `findings`).
pub(super) fn first_segment(relative: &str) -> &str {
    let relative = relative.strip_prefix('/').unwrap_or(relative);
    relative.split('/').next().unwrap_or(relative)
}

/// Whether `path` matches `template` as actix's router matches it: a `{...}` segment
/// matches any one segment that is not empty.
pub(super) fn matches_template(path: &str, template: &str) -> bool {
    let (mut path, mut template) = (path.split('/'), template.split('/'));
    loop {
        match (path.next(), template.next()) {
            (None, None) => return true,
            (Some(p), Some(t)) if p == t => {}
            (Some(p), Some(t)) if t.starts_with('{') && t.ends_with('}') && !p.is_empty() => {}
            _ => return false,
        }
    }
}

/// The routes whose path has the first segment of `relative`.
fn collection(relative: &str) -> impl Iterator<Item = &'static Routed> {
    let table = &*TABLE;
    let indexes = table.by_first.get(first_segment(relative));
    indexes
        .into_iter()
        .flatten()
        .map(move |&i| &table.routes[i])
}

/// The route a request reaches, as the router will choose it: the first of [`ENDPOINTS`]
/// (registration order: a literal path before a templated one) with its method and a path
/// its template matches. `path` is the path the router matches: percent-decoded
/// (`ServiceRequest::match_info().as_str()`), not as sent, or `/api/v1/webhook%73/x` would
/// reach its route unchecked.
pub(crate) fn route_of(method: &Method, path: &str) -> Option<&'static Routed> {
    let relative = path.strip_prefix(PREFIX)?;
    // HEAD is the GET of the same route without its body (its tag, its reads).
    let method = match *method {
        Method::HEAD => &Method::GET,
        _ => method,
    };
    collection(relative).find(|r| {
        r.endpoint.method.actix() == method && matches_template(relative, r.endpoint.path)
    })
}

/// The endpoint a request reaches ([`route_of`]).
#[cfg(test)]
fn endpoint_of(method: &Method, path: &str) -> Option<&'static Endpoint> {
    route_of(method, path).map(|r| r.endpoint)
}

/// Whether `path` (a request path) is a public route, whatever the method.
pub(crate) fn is_public(path: &str) -> bool {
    let Some(relative) = path.strip_prefix(PREFIX) else {
        return false;
    };
    collection(relative).any(|r| r.endpoint.access == Access::Public && r.endpoint.path == relative)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_begins_with_a_literal_segment() {
        for endpoint in ENDPOINTS {
            let first = first_segment(endpoint.path);
            assert!(
                !first.is_empty() && !first.starts_with('{'),
                "{}: the index finds a route by its first segment",
                endpoint.path
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
        assert_eq!(of(Method::HEAD, "/api/v1/findings/f-1"), Some("getFinding"));
        assert_eq!(
            of(Method::GET, "/api/v1/findings/triage"),
            Some("getFinding"),
            "a finding whose id is `triage`"
        );
        assert_eq!(
            of(Method::POST, "/api/v1/findings/triage"),
            Some("triageFindings")
        );
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
        assert_eq!(of(Method::GET, "/api/v1/findings/"), None, "no empty id");
        assert_eq!(of(Method::POST, "/api/v1/webhooks//test"), None);
        assert_eq!(of(Method::GET, "/api/v1findings"), None);
        assert_eq!(of(Method::GET, "/api/v1"), None);
        assert_eq!(of(Method::GET, "/api/v1/"), None);
        assert_eq!(of(Method::GET, "/api/v1/nothing/here"), None);
        assert_eq!(of(Method::GET, "/metrics"), None);
    }

    #[test]
    fn the_index_finds_what_trying_every_route_finds() {
        let paths = [
            "/api/v1/findings",
            "/api/v1/findings/x",
            "/api/v1/findings/x/triage",
            "/api/v1/webhooks/x/deliveries/y",
            "/api/v1/webhooks/x/deliveries/y/redeliver",
            "/api/v1/webhooks/x/test",
            "/api/v1/events/x",
            "/api/v1/keys/current",
            "/api/v1/openapi.json",
            "/api/v1/upr/trend",
        ];
        for method in [Method::GET, Method::POST, Method::PATCH, Method::DELETE] {
            for path in paths {
                let relative = path.strip_prefix(PREFIX).unwrap();
                let tried = ENDPOINTS
                    .iter()
                    .copied()
                    .find(|e| e.method.actix() == method && matches_template(relative, e.path));
                assert_eq!(
                    endpoint_of(&method, path).map(|e| e.operation_id),
                    tried.map(|e| e.operation_id),
                    "{method} {path}"
                );
            }
        }
    }

    #[test]
    fn only_the_contract_is_public_and_for_any_method() {
        assert!(is_public("/api/v1/openapi.json"));
        assert!(!is_public("/api/v1/openapi.json/x"));
        assert!(!is_public("/api/v1/findings"));
        assert!(!is_public("/openapi.json"));
    }
}
