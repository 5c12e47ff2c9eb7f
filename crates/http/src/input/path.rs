//! Path parameters: the `{id}` of a resource (and the `{deliveryId}` of a delivery under
//! its subscription), declared once with its schema, parsed by
//! [`Id`]. An id that cannot exist is answered like one that does not (404 with the same
//! reason), so nothing is learnt from the form of an id.

use std::future::{Ready, ready};

use actix_web::{FromRequest, HttpRequest, dev::Payload};
use posture_domain::{
    DeliveryId, Error, FindingId, IdentityId, WebhookId,
    ids::{EXTERNAL_ID_PATTERN, MAX_EXTERNAL_ID_LEN},
};
use schemars::{Schema, SchemaGenerator, json_schema};

use crate::error::ApiError;

/// The name of the path parameter of every resource route.
const ID: &str = "id";

/// A path parameter as the route table declares it.
pub struct PathParam {
    pub name: &'static str,
    pub description: &'static str,
    pub schema: fn(&mut SchemaGenerator) -> Schema,
}

fn external_id_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_EXTERNAL_ID_LEN,
        "pattern": EXTERNAL_ID_PATTERN
    })
}

fn uuid_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "uuid" })
}

/// The id of analyzer data (identities, findings): the analyzer's own string.
pub static EXTERNAL_ID: PathParam = PathParam {
    name: ID,
    description: "The resource's id.",
    schema: external_id_schema,
};

/// The id of a webhook subscription: a UUID posture made.
pub static WEBHOOK_ID: PathParam = PathParam {
    name: ID,
    description: "The subscription's id.",
    schema: uuid_schema,
};

/// The id of an event of the feed: a UUID posture made.
pub static EVENT_ID: PathParam = PathParam {
    name: ID,
    description: "The event's id.",
    schema: uuid_schema,
};

/// The id of a delivery of a webhook subscription (`{deliveryId}`).
pub static DELIVERY_ID: PathParam = PathParam {
    name: "deliveryId",
    description: "The delivery's id (its `X-Service-Delivery`).",
    schema: uuid_schema,
};

/// A resource served by id: the path parameter naming it, and how its absence is said.
pub trait Resource: std::str::FromStr + 'static {
    /// The reason of its 404.
    const NOT_FOUND: &'static str;
    /// The path parameter holding its id.
    const PARAM: &'static PathParam;
}

impl Resource for FindingId {
    const NOT_FOUND: &'static str = "finding not found";
    const PARAM: &'static PathParam = &EXTERNAL_ID;
}

impl Resource for IdentityId {
    const NOT_FOUND: &'static str = "identity not found";
    const PARAM: &'static PathParam = &EXTERNAL_ID;
}

impl Resource for WebhookId {
    const NOT_FOUND: &'static str = "webhook subscription not found";
    const PARAM: &'static PathParam = &WEBHOOK_ID;
}

impl Resource for posture_domain::EventId {
    const NOT_FOUND: &'static str = "event not found";
    const PARAM: &'static PathParam = &EVENT_ID;
}

impl Resource for DeliveryId {
    const NOT_FOUND: &'static str = "delivery not found";
    const PARAM: &'static PathParam = &DELIVERY_ID;
}

/// The 404 of resource `T`.
pub fn not_found_error<T: Resource>() -> ApiError {
    ApiError::NotFound(Some(T::NOT_FOUND))
}

/// Maps a port's `NotFound` to the 404 of resource `T`; other errors as usual.
pub fn not_found<T: Resource>(e: Error) -> ApiError {
    match e {
        Error::NotFound => not_found_error::<T>(),
        other => other.into(),
    }
}

/// The resource id of the path: `Id(id): Id<FindingId>`.
pub struct Id<T>(pub T);

impl<T: Resource> FromRequest for Id<T> {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            req.match_info()
                .get(T::PARAM.name)
                .and_then(|raw| raw.parse::<T>().ok())
                .map(Id)
                .ok_or_else(not_found_error::<T>),
        )
    }
}
