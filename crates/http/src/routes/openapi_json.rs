//! `GET /openapi.json`: the OpenAPI 3.1 contract, public (no key needed).

use std::sync::LazyLock;

use actix_web::{HttpRequest, HttpResponse, http::header::ContentType, web};
use schemars::{Schema, SchemaGenerator, json_schema};

use super::{Endpoint, HttpMethod, Success};
use crate::{error::ApiError, openapi, query::QueryParams};

fn document_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "An OpenAPI 3.1 document.",
        "required": ["openapi", "info", "paths"]
    })
}

pub static GET: Endpoint = Endpoint {
    method: HttpMethod::Get,
    path: "/openapi.json",
    scope: None,
    operation_id: "getOpenApi",
    tag: "contract",
    summary: "The OpenAPI 3.1 contract",
    description: "This document. Public: no key is needed (it is rate-limited per client \
                  address like any unauthenticated request).",
    params: &[],
    body: None,
    success: Success::Json {
        status: 200,
        description: "The OpenAPI document.",
        schema: document_schema,
    },
    errors: &[400],
    success_headers: &[],
    handler: || web::route().to(get_openapi),
};

/// Rendered once per process: the document only changes with the code.
static DOCUMENT: LazyLock<String> = LazyLock::new(openapi::render);

async fn get_openapi(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    QueryParams::parse(req.query_string())?.finish()?;
    Ok(HttpResponse::Ok()
        .content_type(ContentType::json())
        .body(DOCUMENT.as_str()))
}
