//! `GET /openapi.json`: the OpenAPI 3.1 contract, public (no key needed).
//!
//! The document is rendered once, when the state is built, and served from the state: the
//! contract is made from the route table, so this route does not reach back into it.

use actix_web::{HttpResponse, http::header::ContentType, web};
use schemars::{Schema, SchemaGenerator, json_schema};

use super::{Access, Answer, Answers, Built, Content, Endpoint};
use crate::{handler, state::ApiState};

fn document_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "An OpenAPI 3.1 document.",
        "required": ["openapi", "info", "paths"],
        "properties": {
            "openapi": { "type": "string", "description": "The OpenAPI version: `3.1.0`." },
            "info": { "type": "object", "description": "Title, version, contact, license." },
            "paths": { "type": "object", "description": "The operations, by path." }
        },
        "examples": [{
            "openapi": "3.1.0",
            "info": { "title": "posture API", "version": "1.0.0" },
            "paths": { "/api/v1/findings": { "get": { "operationId": "listFindings" } } }
        }]
    })
}

pub static GET: Endpoint = Endpoint {
    path: "/openapi.json",
    operation_id: "getOpenApi",
    tag: "contract",
    summary: "The OpenAPI 3.1 contract",
    description: "This document. Public: no key is needed (it is rate-limited per client \
                  address like any unauthenticated request).",
    success: "The OpenAPI document.",
    errors: &[400],
    ..Endpoint::of(handler!(get_openapi), Access::Public)
};

/// The document, rendered once (so not a [`Reply`](super::Reply) of a type).
enum Document {}

impl Answers for Document {
    const ANSWER: Answer = Answer {
        status: 200,
        content: Content::Json(document_schema),
    };
}

async fn get_openapi(state: web::Data<ApiState>) -> Built<Document> {
    Built::new(
        HttpResponse::Ok()
            .content_type(ContentType::json())
            .body(state.contract.clone()),
    )
}
