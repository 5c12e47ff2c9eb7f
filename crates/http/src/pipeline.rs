//! The one middleware of every request, in the order its parts apply:
//!
//! 1. the request's id, span and clock (`telemetry.rs`), and the encoding its
//!    `Accept-Encoding` asks for (`compression.rs`);
//! 2. the gate of the surface its path is under, then the router and the handler:
//!    - under `/api/v1`, its route found in the table once (`routes::route_of`), then the
//!      gate (`gate.rs`: the key, the rate limit, a conditional read's 304) and the route's
//!      own admission (`routes::serve`: its scope, its query, its `Idempotency-Key`);
//!    - under `/scim/v2`, the same authentication and counting, then `provision:scim` and
//!      the customer's SCIM write budget, refusals in SCIM's shape (`scim::gate`);
//!    - elsewhere (health, metrics, the reference page, the console), none here;
//! 3. on the way out, the `{error, reason}` body of an error that has none
//!    (`json_errors.rs`), the compression, and the headers, series and access event of
//!    every response.
//!
//! One layer rather than one each: each layer costs every request a boxed future and a
//! call through it (docs/performance.md, "Overhead per request").

use actix_web::{
    Error,
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    middleware::Next,
};
use tracing::Instrument as _;

use crate::{compression, docs_page, gate, json_errors, routes, scim, telemetry::Served};

/// Whether `path` is `prefix` or under it, as actix's scope matches it.
fn under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Whether `path` reaches the `/api/v1` scope: under its prefix, and not the reference
/// page's, which is registered before the scope, public and static (`docs_page.rs`).
fn is_api(path: &str) -> bool {
    let page =
        under(path, docs_page::PATH) && path[docs_page::PATH.len()..].matches('/').count() <= 1;
    under(path, routes::PREFIX) && !page
}

/// `hsts`: whether responses carry `Strict-Transport-Security` (serving TLS), read once
/// when the application is built.
pub(crate) async fn serve<B: MessageBody + 'static>(
    hsts: bool,
    req: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let served = Served::start(&req);
    let encoding = compression::negotiated(&req);
    // The path as the router matches it, percent-decoded: the route found here must be
    // the one the router dispatches to.
    let path = req.match_info().as_str();
    let route = match is_api(path) {
        true => Some(routes::route_of(req.method(), path)),
        false => None,
    };
    let span = served.span.clone();
    let response = match route {
        Some(route) => gate::gate(route, req, next).instrument(span).await?,
        None if under(path, scim::PREFIX) => scim::gate(req, next)
            .instrument(span)
            .await?
            .map_into_boxed_body(),
        None => next.call(req).instrument(span).await?.map_into_boxed_body(),
    };
    let response = compression::encode(encoding, json_errors::ensure_json(response));
    let label = route.flatten().map(|r| r.full_path.as_str());
    Ok(served.finish(response, label, hsts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_is_its_prefix_and_what_is_under_it() {
        assert!(is_api("/api/v1"));
        assert!(is_api("/api/v1/"));
        assert!(is_api("/api/v1/findings"));
        assert!(!is_api("/api/v1findings"));
        assert!(!is_api("/api/v2/findings"));
        assert!(!is_api("/healthz"));
        assert!(!is_api("/scim/v2/Users"));
        assert!(!is_api("/api/v1/docs"));
        assert!(!is_api("/api/v1/docs/"));
        assert!(!is_api("/api/v1/docs/scalar.js"));
        assert!(
            is_api("/api/v1/docs/a/b"),
            "no page of the reference: the API's 404"
        );
        assert!(is_api("/api/v1/docsx"));
    }

    #[test]
    fn scim_is_its_prefix_and_what_is_under_it() {
        assert!(under("/scim/v2", scim::PREFIX));
        assert!(under("/scim/v2/Users", scim::PREFIX));
        assert!(!under("/scim/v2Users", scim::PREFIX));
        assert!(!under("/scim/v1/Users", scim::PREFIX));
    }
}
