//! A handler answering what its type does not state (a bare `HttpResponse`): the contract
//! could not say what it answers.

use actix_web::HttpResponse;
use posture_http::{
    ApiError, handler,
    routes::{Access, Endpoint},
};

async fn answers_anything() -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json("undeclared"))
}

static ROUTE: Endpoint = Endpoint {
    path: "/anything",
    ..Endpoint::of(handler!(answers_anything), Access::Public)
};

fn main() {
    let _ = &ROUTE;
}
