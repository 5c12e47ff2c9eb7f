//! Request ids and the access log: one event per request, begun and ended by the one
//! middleware (`pipeline.rs`), which also sets the headers every response carries
//! (`health::security_headers`) here.
//!
//! The request id is taken from `X-Request-Id` when it is a short token of safe characters,
//! otherwise generated; it is echoed in the response and carried by a span that wraps the
//! request, so every event logged while serving it (errors included) names it. The access
//! event has stable dotted fields: `http.method`, `http.route` (the route template, never
//! the raw path), `http.status`, `http.latency_ms`, `request.id` and `key.id` (the key's
//! public id; the key itself is never logged).

use std::{borrow::Cow, cell::RefCell, collections::HashMap, time::Instant};

use actix_web::{
    HttpMessage,
    dev::{ServiceRequest, ServiceResponse},
    http::{
        Method,
        header::{HeaderName, HeaderValue},
    },
};
use posture_domain::Principal;
use tracing::field;

/// The request id header, in and out.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The id of the request being served.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

fn incoming_id(req: &ServiceRequest) -> Option<String> {
    let value = req.headers().get(&REQUEST_ID)?.to_str().ok()?;
    let ok = !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    ok.then(|| value.to_owned())
}

/// The metric label of a method: one of RFC 9110's methods (and PATCH), else `OTHER`.
fn method_label(method: &Method) -> &'static str {
    const KNOWN: &[(Method, &str)] = &[
        (Method::GET, "GET"),
        (Method::HEAD, "HEAD"),
        (Method::POST, "POST"),
        (Method::PUT, "PUT"),
        (Method::DELETE, "DELETE"),
        (Method::CONNECT, "CONNECT"),
        (Method::OPTIONS, "OPTIONS"),
        (Method::TRACE, "TRACE"),
        (Method::PATCH, "PATCH"),
    ];
    KNOWN
        .iter()
        .find(|(known, _)| known == method)
        .map_or("OTHER", |(_, label)| label)
}

/// The series of one (method, route, status).
#[derive(Clone)]
struct Series {
    requests: metrics::Counter,
    duration: metrics::Histogram,
}

/// A route label: a template of the table (no copy), or another route's pattern.
type Route = Cow<'static, str>;

thread_local! {
    /// Each worker's handles of the series it has recorded, so that a request costs no
    /// label strings and no registry lookup. Bounded: every label comes from a closed set.
    static SERIES: RefCell<HashMap<(&'static str, Route, u16), Series>> =
        RefCell::new(HashMap::new());
}

/// Counts a request and records its duration.
fn record(method: &'static str, route: Route, status: u16, seconds: f64) {
    SERIES.with(|series| {
        let mut series = series.borrow_mut();
        let handles =
            series
                .entry((method, route, status))
                .or_insert_with_key(|(method, route, status)| {
                    let labels = [
                        ("method", (*method).to_owned()),
                        ("route", route.clone().into_owned()),
                        ("status", status.to_string()),
                    ];
                    Series {
                        requests: metrics::counter!("posture_http_requests_total", &labels),
                        duration: metrics::histogram!(
                            "posture_http_request_duration_seconds",
                            &labels
                        ),
                    }
                });
        handles.requests.increment(1);
        handles.duration.record(seconds);
    });
}

/// A request being served: its id, its span, when it began.
pub(crate) struct Served {
    id: Option<HeaderValue>,
    pub(crate) span: tracing::Span,
    started: Instant,
}

impl Served {
    /// Begins `req`: its id (taken or made), in its extensions and its span.
    pub(crate) fn start(req: &ServiceRequest) -> Served {
        let id = incoming_id(req).unwrap_or_else(|| uuid::Uuid::now_v7().simple().to_string());
        let span = tracing::info_span!(
            "request",
            request.id = %id,
            http.method = %req.method(),
            http.route = field::Empty,
            key.id = field::Empty,
        );
        let header = HeaderValue::from_str(&id).ok();
        req.extensions_mut().insert(RequestId(id));
        Served {
            id: header,
            span,
            started: Instant::now(),
        }
    }

    /// Ends it: the headers every response carries, its series, its access event. `route`:
    /// its template in the route table, if it reached one.
    pub(crate) fn finish<B>(
        self,
        mut response: ServiceResponse<B>,
        route: Option<&'static str>,
        hsts: bool,
    ) -> ServiceResponse<B> {
        let latency_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        if let Some(id) = self.id {
            response.headers_mut().insert(REQUEST_ID, id);
        }
        crate::health::security_headers(response.headers_mut(), hsts);
        let request = response.request();
        let route: Route = match route {
            Some(route) => Cow::Borrowed(route),
            None => Cow::Owned(
                request
                    .match_pattern()
                    .unwrap_or_else(|| "unmatched".to_owned()),
            ),
        };
        let span = self.span;
        span.record("http.route", route.as_ref());
        if let Some(principal) = request.extensions().get::<Principal>() {
            span.record("key.id", field::display(principal.key_id()));
        }
        let status = response.status().as_u16();
        // Every label comes from a closed set, so that no request can add a series: the
        // method is one HTTP defines or OTHER, the route a template of the table or
        // `unmatched`.
        record(
            method_label(request.method()),
            route,
            status,
            latency_ms / 1000.0,
        );
        span.in_scope(|| {
            tracing::info!(
                http.status = status,
                http.latency_ms = latency_ms,
                "request served"
            );
        });
        response
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    #[test]
    fn methods_outside_the_standard_set_share_one_label() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        let made_up = Method::from_bytes(b"BREW").unwrap();
        assert_eq!(method_label(&made_up), "OTHER");
    }

    #[test]
    fn a_safe_incoming_request_id_is_kept() {
        let req = TestRequest::default()
            .insert_header((REQUEST_ID, "abc-123_x.y"))
            .to_srv_request();
        assert_eq!(incoming_id(&req).as_deref(), Some("abc-123_x.y"));
    }

    #[test]
    fn an_unsafe_incoming_request_id_is_replaced() {
        let req = TestRequest::default()
            .insert_header((REQUEST_ID, "a b\"c"))
            .to_srv_request();
        assert_eq!(incoming_id(&req), None);
        let long = "x".repeat(65);
        let req = TestRequest::default()
            .insert_header((REQUEST_ID, long))
            .to_srv_request();
        assert_eq!(incoming_id(&req), None);
    }
}
