//! One operation of the contract, folded from its [`Endpoint`]'s typed fields and its
//! handler's types: its parameters (path, query parts, the conditional headers its `tagging`
//! and `if_match` call for), its responses (success, 304 when it is conditional, its
//! errors), its request body and its security requirement.

use aide::openapi::{
    MediaType, Operation, Parameter, ParameterData, ParameterSchemaOrContent, QueryStyle,
    ReferenceOr, RequestBody, Response, Responses, StatusCode,
};
use indexmap::IndexMap;
use posture_wire::ErrorResponse;
use schemars::SchemaGenerator;
use serde_json::Value;

use super::{OAUTH_SCHEME, SECURITY_SCHEME, headers, json_content, schema_object, texts};
use crate::{
    input::query_generator,
    preconditions::IF_MATCH_PATTERN,
    routes::{Access, Content, Endpoint, schema},
};

/// The operation of `endpoint`.
pub(super) fn operation(endpoint: &Endpoint, generator: &mut SchemaGenerator) -> Operation {
    let (security, requirement) = security(endpoint.access);
    Operation {
        tags: vec![endpoint.tag.to_owned()],
        summary: Some(endpoint.summary.to_owned()),
        description: Some(format!("{}{requirement}", endpoint.description)),
        operation_id: Some(endpoint.operation_id.to_owned()),
        parameters: parameters(endpoint, generator),
        request_body: request_body(endpoint, generator),
        responses: Some(Responses {
            responses: responses(endpoint, generator),
            ..Responses::default()
        }),
        security,
        // The first of them where a route needs two (the security requirement lists both).
        extensions: IndexMap::from([(
            "x-required-scope".to_owned(),
            endpoint
                .access
                .scopes()
                .first()
                .map_or(Value::Null, |s| Value::from(s.as_str())),
        )]),
        ..Operation::default()
    }
}

/// The statuses of its error responses: its own, then those of every route of its access.
fn error_statuses(endpoint: &Endpoint) -> Vec<u16> {
    let mut statuses: Vec<u16> = endpoint.errors.to_vec();
    if endpoint.idempotent {
        // A key in progress; a key used for another request.
        statuses.extend([409, 422]);
    }
    match endpoint.access {
        Access::Public => {}
        Access::AnyKey => statuses.extend([401, 503]),
        Access::Scope(_) | Access::AllOf(_) => statuses.extend([401, 403, 503]),
    }
    statuses.extend([429, 500]);
    statuses.sort_unstable();
    statuses.dedup();
    statuses
}

/// Where a parameter is given.
#[derive(Clone, Copy)]
enum ParamIn {
    Query,
    Path,
    Header,
}

fn parameter(
    location: ParamIn,
    name: &str,
    description: Option<String>,
    required: bool,
    json_schema: schemars::Schema,
) -> ReferenceOr<Parameter> {
    // A comma-separated list is one value: `style: form, explode: false`.
    let comma_list = json_schema.get("type").and_then(Value::as_str) == Some("array");
    let parameter_data = ParameterData {
        name: name.to_owned(),
        description,
        required,
        deprecated: None,
        format: ParameterSchemaOrContent::Schema(schema_object(json_schema)),
        example: None,
        examples: IndexMap::new(),
        explode: comma_list.then_some(false),
        extensions: IndexMap::new(),
    };
    ReferenceOr::Item(match location {
        ParamIn::Query => Parameter::Query {
            parameter_data,
            allow_reserved: false,
            style: QueryStyle::Form,
            allow_empty_value: None,
        },
        ParamIn::Path => Parameter::Path {
            parameter_data,
            style: aide::openapi::PathStyle::Simple,
        },
        ParamIn::Header => Parameter::Header {
            parameter_data,
            style: aide::openapi::HeaderStyle::Simple,
        },
    })
}

/// Its path parameters, the parameters of its query parts, and the conditional headers.
fn parameters(endpoint: &Endpoint, generator: &mut SchemaGenerator) -> Vec<ReferenceOr<Parameter>> {
    let mut parameters: Vec<_> = endpoint
        .path_params()
        .map(|p| {
            let schema = (p.schema)(generator);
            parameter(
                ParamIn::Path,
                p.name,
                Some(p.description.to_owned()),
                true,
                schema,
            )
        })
        .collect();
    let mut query_generator = query_generator();
    for part in endpoint.query_parts() {
        for p in part.params(&mut query_generator) {
            parameters.push(parameter(
                ParamIn::Query,
                &p.name,
                p.description,
                p.required,
                p.schema,
            ));
        }
    }
    let idempotency: &[&crate::routes::RequestHeader] = if endpoint.idempotent {
        &[&crate::routes::IDEMPOTENCY_KEY]
    } else {
        &[]
    };
    for h in endpoint.request_headers.iter().chain(idempotency) {
        let schema = (h.schema)(generator);
        parameters.push(parameter(
            ParamIn::Header,
            h.name,
            Some(h.description.to_owned()),
            false,
            schema,
        ));
    }
    if endpoint.is_conditional() {
        parameters.push(parameter(
            ParamIn::Header,
            "If-None-Match",
            Some(
                "The `ETag` of an earlier response to the same request with the same key: if \
                 nothing it shows has changed, the answer is 304 with no body, which does not \
                 count against the key's rate limit."
                    .to_owned(),
            ),
            false,
            // Bounded by the server's header limits (a larger header is 431), not here.
            schemars::json_schema!({"type": "string"}),
        ));
    }
    if endpoint.if_match {
        parameters.push(parameter(
            ParamIn::Header,
            "If-Match",
            Some(
                "The subscription's `ETag` (`\"v3\"`) as you read it: the change is made only \
                 if the subscription has not changed since, and is 412 otherwise. `*`, or no \
                 header: whatever its state."
                    .to_owned(),
            ),
            false,
            schemars::json_schema!({"type": "string", "pattern": IF_MATCH_PATTERN}),
        ));
    }
    parameters
}

fn response(
    description: &str,
    content: IndexMap<String, MediaType>,
    headers: IndexMap<String, ReferenceOr<aide::openapi::Header>>,
) -> ReferenceOr<Response> {
    ReferenceOr::Item(Response {
        description: description.to_owned(),
        content,
        headers,
        ..Response::default()
    })
}

/// Its success response, a 304 when it is conditional, and its errors.
fn responses(
    endpoint: &Endpoint,
    generator: &mut SchemaGenerator,
) -> IndexMap<StatusCode, ReferenceOr<Response>> {
    let conditional = endpoint.is_conditional();
    let etag: &[&str] = if conditional && !endpoint.success_headers.contains(&"ETag") {
        &["ETag"]
    } else {
        &[]
    };
    let replayed: &[&str] = if endpoint.idempotent {
        &[crate::idempotency::REPLAYED]
    } else {
        &[]
    };
    let success_headers = headers::references(
        headers::ALWAYS
            .iter()
            .chain(endpoint.success_headers)
            .chain(etag)
            .chain(replayed),
    );
    let mut responses = IndexMap::new();
    if conditional {
        responses.insert(
            StatusCode::Code(304),
            response(
                "Not modified: the `If-None-Match` tag is current. No body; not counted against \
                 the key's rate limit (the rate-limit headers show the window as it stands).",
                IndexMap::new(),
                headers::references(headers::ALWAYS.iter().chain(etag)),
            ),
        );
    }
    let answer = endpoint.handler.answer;
    let content = match answer.content {
        Content::Json(schema) => json_content(schema(generator)),
        Content::Media(content) => content
            .iter()
            .map(|(media, schema)| {
                let media_type = MediaType {
                    schema: Some(schema_object(schema(generator))),
                    ..MediaType::default()
                };
                ((*media).to_owned(), media_type)
            })
            .collect(),
        Content::Empty => IndexMap::new(),
    };
    let (status, description) = (answer.status, endpoint.success);
    let mut success = response(description, content, success_headers);
    if let ReferenceOr::Item(success) = &mut success {
        success.links = links(endpoint.operation_id);
    }
    responses.insert(StatusCode::Code(status), success);
    for status in error_statuses(endpoint) {
        responses.insert(
            StatusCode::Code(status),
            response(
                texts::status_description(status),
                json_content(schema::<ErrorResponse>(generator)),
                headers::references(headers::ALWAYS.iter().chain(headers::for_error(status))),
            ),
        );
    }
    responses
}

/// Where an answer leads (OpenAPI links: a client, or a stateful fuzzer, goes from a read
/// finding to its triage): `(from, to, the id's place in the answer)`.
const LINKS: &[(&str, &str, &str)] = &[
    ("listFindings", "getFinding", "$response.body#/data/0/id"),
    ("listFindings", "triageFinding", "$response.body#/data/0/id"),
    ("getFinding", "triageFinding", "$response.body#/data/id"),
    ("getFinding", "listFindingTriage", "$response.body#/data/id"),
    ("triageFinding", "getFinding", "$response.body#/data/id"),
    (
        "triageFinding",
        "listFindingTriage",
        "$response.body#/data/id",
    ),
    ("triageFindings", "getFinding", "$response.body#/data/0/id"),
];

/// The links of the success answer of `operation_id`, named after their target.
fn links(operation_id: &str) -> IndexMap<String, ReferenceOr<aide::openapi::Link>> {
    LINKS
        .iter()
        .filter(|(from, ..)| *from == operation_id)
        .map(|(_, to, id)| {
            let link = aide::openapi::Link {
                description: Some(format!("The finding's `id` as the `id` of `{to}`.")),
                operation: aide::openapi::LinkOperation::OperationId((*to).to_owned()),
                request_body: None,
                parameters: [("id".to_owned(), serde_json::Value::from(*id))].into(),
                server: None,
                extensions: IndexMap::new(),
            };
            ((*to).to_owned(), ReferenceOr::Item(link))
        })
        .collect()
}

/// Its JSON body, if it takes one; a body whose every field is optional may be left out
/// (`input/body.rs`).
fn request_body(
    endpoint: &Endpoint,
    generator: &mut SchemaGenerator,
) -> Option<ReferenceOr<RequestBody>> {
    endpoint.handler.body.map(|schema| {
        let schema = schema(generator);
        let required = !crate::input::all_optional(&schema, generator);
        ReferenceOr::Item(RequestBody {
            description: Some(endpoint.body.to_owned()),
            content: json_content(schema),
            required,
            ..RequestBody::default()
        })
    })
}

/// Its security requirements (a key, or an OAuth access token, holding the same scopes),
/// and the sentence its description ends with.
fn security(access: Access) -> (Vec<IndexMap<String, Vec<String>>>, String) {
    let either = |scopes: Vec<String>| {
        [SECURITY_SCHEME, OAUTH_SCHEME]
            .into_iter()
            .map(|scheme| IndexMap::from([(scheme.to_owned(), scopes.clone())]))
            .collect()
    };
    match access {
        Access::Scope(scope) => (
            either(vec![scope.as_str().to_owned()]),
            format!("\n\nRequired scope: `{scope}`."),
        ),
        // One requirement listing them: a key must hold every scope it lists.
        Access::AllOf(scopes) => (
            either(scopes.iter().map(|s| s.as_str().to_owned()).collect()),
            format!(
                "\n\nRequired scopes: {}, together.",
                scopes
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        ),
        Access::AnyKey => (
            either(Vec::new()),
            "\n\nAny valid key or access token, whatever its scopes.".to_owned(),
        ),
        // An empty requirement: no authentication.
        Access::Public => (vec![IndexMap::new()], String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::ENDPOINTS;

    #[test]
    fn every_link_joins_two_operations_and_names_the_target_s_id() {
        let endpoint = |id: &str| {
            ENDPOINTS
                .iter()
                .find(|e| e.operation_id == id)
                .unwrap_or_else(|| panic!("no operation {id}"))
        };
        for (from, to, _) in LINKS {
            endpoint(from);
            assert!(endpoint(to).path.contains("{id}"), "{to} takes no id");
            assert!(links(from).contains_key(*to));
        }
        assert!(links("listWebhooks").is_empty());
    }
}
