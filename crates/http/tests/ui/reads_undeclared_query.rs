//! A handler taking an extractor that declares nothing: actix's own `Query` reads
//! parameters the contract would not know of.

use actix_web::web::Query;
use posture_http::{
    ApiError, handler,
    routes::{Access, Endpoint, Reply},
};
use posture_wire::query::TenantQuery;

async fn undeclared(_: Query<TenantQuery>) -> Result<Reply<u32>, ApiError> {
    Ok(Reply::new(&0))
}

static ROUTE: Endpoint = Endpoint {
    path: "/undeclared",
    ..Endpoint::of(handler!(undeclared), Access::Public)
};

fn main() {
    let _ = &ROUTE;
}
