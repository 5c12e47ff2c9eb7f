//! A handler reading two JSON bodies: a request has one.

use posture_http::{
    ApiError, handler,
    input::Json,
    routes::{Access, Endpoint, NoContent},
};

async fn two_bodies(_: Json<u32>, _: Json<u64>) -> Result<NoContent, ApiError> {
    Ok(NoContent)
}

static ROUTE: Endpoint = Endpoint {
    path: "/twice",
    ..Endpoint::of(handler!(two_bodies), Access::Public)
};

fn main() {
    let _ = &ROUTE;
}
