//! Inputs declared once: a route's query parameters, path parameters and body are the types
//! of its handler's extractors, each of which declares what it reads
//! ([`Declares`](crate::routes::Declares)); both the parsing and the OpenAPI document derive
//! from them.
//!
//! * **Query** (`query.rs`): [`QueryPart`]s, types of `posture-wire` whose fields are the
//!   parameters, read with [`Input`], [`ListQuery`] or [`TenantFilter`] (`list.rs`, the
//!   skeleton every list shares). The route's admission (`routes::serve`) refuses parameters
//!   no part declares and repeated ones, then parses every part for the handler.
//! * **Path** (`path.rs`): the `{id}` of a resource, a [`PathParam`] its [`Resource`] names,
//!   parsed by [`Id`]; an id that cannot exist is 404 like a missing one.
//! * **Body** (`body.rs`): [`Json`] reads a bounded JSON body into its type, whose schema the
//!   contract states.

mod body;
mod cursor;
mod list;
mod path;
mod query;

pub use body::{Json, MAX_BODY_BYTES, all_optional};
pub use list::{ListPart, ListParts, ListQuery, TenantFilter};
pub use path::{
    DELIVERY_ID, EVENT_ID, EXTERNAL_ID, Id, PathParam, Resource, WEBHOOK_ID, not_found,
};
pub use query::{Input, QueryParamDoc, QueryPart, part, query_generator};

#[cfg(test)]
pub(crate) use body::decode;
pub(crate) use cursor::canonical_query;
pub(crate) use query::{declared_names, parse as parse_query};
