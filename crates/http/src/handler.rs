//! A route's handler is its declaration: the path parameters, query parts and JSON body a
//! route reads come from its handler's argument types ([`Declares`]), and its success answer
//! (status and body) from its return type ([`Answers`], `answer.rs`). [`handler!`](crate::handler) takes
//! both from the function it serves, so the contract and the handler cannot disagree on
//! them: a handler that reads something undeclared, or answers an undeclared shape, does not
//! compile. (A handler taking the `HttpRequest` may still read headers by hand: the
//! conditional ones and `Last-Event-ID`, which the `Endpoint` states with `if_match`,
//! `tagging` and `request_headers`.)
//!
//! A handler that breaks one of these rules does not compile: answering what its type does
//! not state (a bare `HttpResponse`), taking an extractor that declares nothing (actix's own
//! `Query`), a list whose query has no page, reading two bodies. `tests/ui/` holds one such
//! route per rule with the error it must give (`tests/compile_fail.rs`, trybuild), so a
//! route that fails for another reason fails the test. A handler whose parts are all
//! declared does compile:
//!
//! ```
//! use posture_http::{
//!     ApiError, handler,
//!     input::{Input, ListQuery},
//!     routes::{Access, Endpoint, Reply},
//! };
//! use posture_wire::{paging::PageQuery, query::TenantQuery};
//!
//! async fn paged(
//!     Input(_): Input<TenantQuery>,
//!     _: ListQuery<(PageQuery,)>,
//! ) -> Result<Reply<u32>, ApiError> {
//!     Ok(Reply::new(&0))
//! }
//!
//! static ROUTE: Endpoint = Endpoint {
//!     path: "/paged",
//!     ..Endpoint::of(handler!(paged), Access::Public)
//! };
//! assert_eq!(ROUTE.handler.answer.status, 200);
//! assert_eq!(ROUTE.query_parts().len(), 2);
//! ```

use actix_web::{FromRequest, HttpRequest, Responder, Route, web};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::{
    answer::{Answer, Answers, SchemaFn, schema},
    auth::Caller,
    input::{
        Id, Input, Json, ListParts, ListQuery, PathParam, QueryPart, Resource, TenantFilter, part,
    },
    reads::Reads,
};

/// What a route's handler declares: how actix serves it and what it reads and answers.
#[derive(Clone, Copy)]
pub struct Handler {
    /// The actix route serving it (without its method guard).
    pub(crate) route: fn() -> Route,
    /// The path parameters it reads, in argument order.
    pub path: &'static [&'static [&'static PathParam]],
    /// The query parts it reads, in argument order (the contract's order of parameters).
    pub query: &'static [&'static [QueryPart]],
    /// The JSON body it reads, if any.
    pub body: Option<SchemaFn>,
    /// What it answers when it succeeds.
    pub answer: Answer,
}

impl Handler {
    /// The declaration of handler `f`, served by `route` (which [`handler!`](crate::handler)
    /// makes from the same function).
    pub const fn of<F, Args>(_: &F, route: fn() -> Route) -> Handler
    where
        F: actix_web::Handler<Args>,
        Args: FromRequest + Arguments,
        F::Output: Answers,
    {
        Handler {
            route,
            path: Args::PATH,
            query: Args::QUERY,
            body: Args::BODY,
            answer: <F::Output as Answers>::ANSWER,
        }
    }
}

/// The declaration of a handler function: `handler!(list_findings)`.
#[macro_export]
macro_rules! handler {
    ($f:path) => {
        $crate::routes::Handler::of(&$f, || $crate::routes::route_to($f))
    };
}

/// The actix route of handler `f` (for [`handler!`](crate::handler)).
pub fn route_to<F, Args>(f: F) -> Route
where
    F: actix_web::Handler<Args>,
    Args: FromRequest + 'static,
    F::Output: Responder + 'static,
{
    web::route().to(f)
}

/// An extractor's share of its route's declaration. Every extractor a handler takes states
/// one, if only that it reads nothing the contract describes.
pub trait Declares {
    /// The path parameters it reads.
    const PATH: &'static [&'static PathParam] = &[];
    /// The query parts it reads, in the order the contract lists their parameters.
    const QUERY: &'static [QueryPart] = &[];
    /// The schema of the JSON body it reads.
    const BODY: Option<SchemaFn> = None;
}

/// A handler's arguments, together: what [`Declares`] says of each.
pub trait Arguments {
    const PATH: &'static [&'static [&'static PathParam]];
    const QUERY: &'static [&'static [QueryPart]];
    const BODY: Option<SchemaFn>;
}

/// The one body among a handler's arguments: two do not compile (a request has one).
const fn one_body(bodies: &[Option<SchemaFn>]) -> Option<SchemaFn> {
    let mut found = None;
    let mut i = 0;
    while i < bodies.len() {
        if let Some(body) = bodies[i] {
            assert!(found.is_none(), "a handler reads one JSON body, not two");
            found = Some(body);
        }
        i += 1;
    }
    found
}

macro_rules! arguments {
    ($($arg:ident),*) => {
        impl<$($arg: Declares),*> Arguments for ($($arg,)*) {
            const PATH: &'static [&'static [&'static PathParam]] = &[$($arg::PATH),*];
            const QUERY: &'static [&'static [QueryPart]] = &[$($arg::QUERY),*];
            const BODY: Option<SchemaFn> = one_body(&[$($arg::BODY),*]);
        }
    };
}

arguments!();
arguments!(A);
arguments!(A, B);
arguments!(A, B, C);
arguments!(A, B, C, D);
arguments!(A, B, C, D, E);
arguments!(A, B, C, D, E, F);
arguments!(A, B, C, D, E, F, G);
arguments!(A, B, C, D, E, F, G, H);

impl Declares for HttpRequest {}

impl<T: ?Sized> Declares for web::Data<T> {}

impl Declares for Caller {}

impl Declares for Reads {}

impl<T: Resource> Declares for Id<T> {
    const PATH: &'static [&'static PathParam] = &[T::PARAM];
}

impl<T: DeserializeOwned + JsonSchema + 'static> Declares for Input<T> {
    const QUERY: &'static [QueryPart] = &[part::<T>()];
}

/// `tenant`, resolved.
impl Declares for TenantFilter {
    const QUERY: &'static [QueryPart] = &[part::<posture_wire::query::TenantQuery>()];
}

/// The list's parts, in their order (`list.rs`).
impl<P: ListParts> Declares for ListQuery<P> {
    const QUERY: &'static [QueryPart] = P::PARTS;
}

impl<T: JsonSchema> Declares for Json<T> {
    const BODY: Option<SchemaFn> = Some(schema::<T>);
}
