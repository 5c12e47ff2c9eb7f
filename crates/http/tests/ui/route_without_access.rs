//! A route made without saying who may call it: `Endpoint::of` has no default access.

use posture_http::{
    ApiError, handler,
    routes::{Endpoint, HttpMethod, NoContent},
};

async fn delete() -> Result<NoContent, ApiError> {
    Ok(NoContent)
}

static FORGOTTEN: Endpoint = Endpoint {
    method: HttpMethod::Delete,
    path: "/webhooks",
    ..Endpoint::of(handler!(delete))
};

fn main() {
    let _ = &FORGOTTEN;
}
