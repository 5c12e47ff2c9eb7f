//! What a route declares: [`Endpoint`] and the parts it is made of.

use actix_web::{Route, web};
use schemars::{JsonSchema, Schema, SchemaGenerator};

use crate::{
    auth::Access,
    input::{Body, PathParam, QueryPart},
};

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

    pub(super) fn actix(self) -> actix_web::http::Method {
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
/// differs from [`Endpoint::open_to`], which takes who may call it: there is no route
/// without an access rule. This does not compile:
///
/// ```compile_fail,E0061
/// use posture_http::routes::{Endpoint, HttpMethod};
///
/// static FORGOTTEN: Endpoint = Endpoint {
///     method: HttpMethod::Delete,
///     path: "/webhooks/{id}",
///     ..Endpoint::open_to()
/// };
/// ```
///
/// nor does a route without `open_to` that does not name all its fields, `access` among them:
///
/// ```compile_fail,E0063
/// use posture_http::routes::{Endpoint, HttpMethod};
///
/// static FORGOTTEN: Endpoint = Endpoint {
///     method: HttpMethod::Delete,
///     path: "/webhooks/{id}",
/// };
/// ```
///
/// while this does:
///
/// ```
/// use posture_domain::Scope;
/// use posture_http::routes::{Access, Endpoint, HttpMethod};
///
/// static DELETE: Endpoint = Endpoint {
///     method: HttpMethod::Delete,
///     path: "/webhooks/{id}",
///     ..Endpoint::open_to(Access::Scope(Scope::ManageWebhooks))
/// };
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
    /// What a route open to `access` has unless its static says otherwise. `path`,
    /// `operation_id`, `tag`, `summary`, `description`, `success` and `handler` are always
    /// given (a test checks). `access` has no default: a forgotten rule would otherwise
    /// open the route to anyone.
    pub const fn open_to(access: Access) -> Endpoint {
        Endpoint {
            method: HttpMethod::Get,
            path: "",
            access,
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
        }
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
