//! A route written without `Endpoint::of` that does not name all its fields, `access`
//! among them.

use posture_http::routes::{Endpoint, HttpMethod};

static FORGOTTEN: Endpoint = Endpoint {
    method: HttpMethod::Delete,
    path: "/webhooks",
};

fn main() {
    let _ = &FORGOTTEN;
}
