//! Inputs declared once: a route's query parameters, path parameters and body are typed
//! declarations in its [`Endpoint`](crate::routes::Endpoint), from which both the parsing and
//! the OpenAPI document derive.
//!
//! * **Query** (`query.rs`): the endpoint lists [`QueryPart`]s, types of `posture-wire` whose
//!   fields are the parameters. The route's middleware refuses parameters no part declares
//!   and repeated ones, then parses every part; handlers take them with [`Input`],
//!   [`ListQuery`] or [`TenantFilter`] (`list.rs`, the skeleton every list shares).
//! * **Path** (`path.rs`): the `{id}` of a resource, declared as a [`PathParam`], parsed by
//!   [`Id`]; an id that cannot exist is 404 like a missing one.
//! * **Body** (`body.rs`): [`Json`] reads a bounded JSON body into the type whose schema the
//!   endpoint declares with [`Body::json`].

mod body;
mod cursor;
mod list;
mod path;
mod query;

pub use body::{Body, Json, MAX_BODY_BYTES, all_optional};
pub use list::{ListQuery, TenantFilter};
pub use path::{
    DELIVERY_ID, EVENT_ID, EXTERNAL_ID, Id, PathParam, Resource, WEBHOOK_ID, not_found,
};
pub use query::{Input, QueryParamDoc, QueryPart, part, query_generator};

#[cfg(test)]
pub(crate) use body::decode;
pub(crate) use cursor::canonical_query;
pub(crate) use query::{declared_names, parse as parse_query};
