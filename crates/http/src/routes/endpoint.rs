//! What a route declares: [`Endpoint`] and the parts it is made of.

use crate::{
    answer::SchemaFn,
    auth::Access,
    handler::Handler,
    input::{PathParam, QueryPart},
};

/// The prefix of every route.
pub const PREFIX: &str = "/api/v1";

/// An HTTP method of the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpMethod {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl HttpMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Put => "PUT",
            HttpMethod::Patch => "PATCH",
            HttpMethod::Delete => "DELETE",
        }
    }

    pub(crate) fn actix(self) -> actix_web::http::Method {
        match self {
            HttpMethod::Get => actix_web::http::Method::GET,
            HttpMethod::Post => actix_web::http::Method::POST,
            HttpMethod::Put => actix_web::http::Method::PUT,
            HttpMethod::Patch => actix_web::http::Method::PATCH,
            HttpMethod::Delete => actix_web::http::Method::DELETE,
        }
    }
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

/// One route: how it is served and what the contract says of it. A static states what
/// differs from [`Endpoint::of`], which takes its handler (whose types declare what the
/// route reads and answers: `handler.rs`) and who may call it: there is no route without
/// an access rule: a route made without one does not compile, nor does a route without
/// `of` that does not name all its fields, `access` among them (`tests/ui/`, with the
/// errors they give). This does:
///
/// ```
/// use posture_domain::Scope;
/// use posture_http::{ApiError, handler, routes::{Access, Endpoint, HttpMethod, NoContent}};
///
/// async fn delete() -> Result<NoContent, ApiError> {
///     Ok(NoContent)
/// }
///
/// static DELETE: Endpoint = Endpoint {
///     method: HttpMethod::Delete,
///     path: "/webhooks",
///     success: "Deleted.",
///     ..Endpoint::of(handler!(delete), Access::Scope(Scope::ManageWebhooks))
/// };
/// assert_eq!(DELETE.handler.answer.status, 204);
/// ```
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
    /// Request headers it reads (beyond authentication and the conditional headers).
    pub request_headers: &'static [&'static RequestHeader],
    /// What its JSON body is, when its handler reads one (the schema is the handler's).
    pub body: &'static str,
    /// What its success answer is (the status and schema are the handler's).
    pub success: &'static str,
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
    /// Its handler: how actix serves it, and what it reads (path parameters, query parts,
    /// body) and answers, from its types (`handler.rs`).
    pub handler: Handler,
}

impl Endpoint {
    /// What a route served by `handler` and open to `access` has unless its static says
    /// otherwise. `path`, `operation_id`, `tag`, `summary`, `description`, `success` (and
    /// `body`, when the handler reads one) are always given (a test checks). `access` has no
    /// default: a forgotten rule would otherwise open the route to anyone.
    pub const fn of(handler: Handler, access: Access) -> Endpoint {
        Endpoint {
            method: HttpMethod::Get,
            path: "",
            access,
            operation_id: "",
            tag: "",
            summary: "",
            description: "",
            request_headers: &[],
            body: "",
            success: "",
            errors: &[],
            success_headers: &[],
            if_match: false,
            idempotent: false,
            tagging: Tagging::None,
            reads: ReadsFrom::Primary,
            handler,
        }
    }

    /// The parameters of the path's `{...}` segments, as its handler reads them.
    pub fn path_params(&self) -> impl Iterator<Item = &'static PathParam> + use<> {
        self.handler.path.iter().copied().flatten().copied()
    }

    /// The parts of the query string: every parameter the route accepts (any other is 400),
    /// as its handler reads them.
    pub fn query_parts(&self) -> Vec<QueryPart> {
        self.handler
            .query
            .iter()
            .copied()
            .flatten()
            .copied()
            .collect()
    }

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
