//! A list whose query has no page: every list pages.

use posture_http::{
    ApiError, handler,
    input::ListQuery,
    routes::{Access, Endpoint, Reply},
};
use posture_wire::query::TenantQuery;

async fn unpaged(_: ListQuery<(TenantQuery,)>) -> Result<Reply<u32>, ApiError> {
    Ok(Reply::new(&0))
}

static ROUTE: Endpoint = Endpoint {
    path: "/unpaged",
    ..Endpoint::of(handler!(unpaged), Access::Public)
};

fn main() {
    let _ = &ROUTE;
}
