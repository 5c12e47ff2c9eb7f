//! The OpenAPI 3.1 document, generated from the route table ([`crate::routes::ENDPOINTS`])
//! with aide's model and schemars schemas of the wire types.
//!
//! [`render`] gives the canonical text: keys sorted, two-space indentation, a final newline.
//! `cargo xtask openapi` writes it to `docs/openapi.json`; `--check` (and a test) fail
//! when the committed file differs.

use aide::openapi::{
    Components, Contact, Info, License, MediaType, OpenApi, PathItem, Paths, ReferenceOr,
    SchemaObject, SecurityScheme, Server, Tag,
};
use indexmap::IndexMap;
use schemars::{SchemaGenerator, generate::SchemaSettings};
use serde_json::Value;

#[cfg(test)]
mod example_rules;
mod examples;
mod headers;
mod named_sets;
mod operation;
mod recorded;
mod texts;
mod webhooks;

use operation::operation;
use texts::tag_description;

use crate::routes::{ENDPOINTS, HttpMethod};

/// The version of the API contract (the `/api/v1` prefix is its major version).
pub const API_VERSION: &str = "1.0.0";

const SECURITY_SCHEME: &str = "bearerAuth";
/// The OAuth 2.0 client credentials scheme, beside the key: every operation accepts either.
const OAUTH_SCHEME: &str = "oauth2";

fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        })
        .for_serialize()
        .into_generator()
}

fn schema_object(json_schema: schemars::Schema) -> SchemaObject {
    SchemaObject {
        json_schema,
        external_docs: None,
        example: None,
    }
}

fn json_content(json_schema: schemars::Schema) -> IndexMap<String, MediaType> {
    IndexMap::from([(
        "application/json".to_owned(),
        MediaType {
            schema: Some(schema_object(json_schema)),
            ..MediaType::default()
        },
    )])
}

/// The document.
pub fn document() -> OpenApi {
    let mut generator = generator();
    let mut paths: IndexMap<String, ReferenceOr<PathItem>> = IndexMap::new();
    let mut tags: Vec<String> = Vec::new();
    for endpoint in ENDPOINTS {
        let op = operation(endpoint, &mut generator);
        if !tags.contains(&endpoint.tag.to_owned()) {
            tags.push(endpoint.tag.to_owned());
        }
        let entry = paths
            .entry(endpoint.full_path())
            .or_insert_with(|| ReferenceOr::Item(PathItem::default()));
        if let ReferenceOr::Item(item) = entry {
            match endpoint.method {
                HttpMethod::Get => item.get = Some(op),
                HttpMethod::Post => item.post = Some(op),
                HttpMethod::Put => item.put = Some(op),
                HttpMethod::Patch => item.patch = Some(op),
                HttpMethod::Delete => item.delete = Some(op),
            }
        }
    }
    let webhooks = webhooks::webhooks(&mut generator);
    let schemas = generator
        .take_definitions(true)
        .into_iter()
        .filter_map(|(name, value)| {
            schemars::Schema::try_from(value)
                .ok()
                .map(|s| (name, schema_object(s)))
        })
        .collect();
    let security_schemes = IndexMap::from([(
        SECURITY_SCHEME.to_owned(),
        ReferenceOr::Item(SecurityScheme::Http {
            scheme: "bearer".to_owned(),
            bearer_format: Some("svc_ API key".to_owned()),
            description: Some(
                "An API key issued by a customer admin: `Authorization: Bearer svc_...`. \
                 Each operation lists the scope it requires; an OAuth access token \
                 (`oauth2`) holding it works the same."
                    .to_owned(),
            ),
            extensions: IndexMap::new(),
        }),
    )]);
    OpenApi {
        info: Info {
            title: "posture API".to_owned(),
            version: API_VERSION.to_owned(),
            description: Some(
                "Scoped, authenticated read access to a customer's identity-security data, \
                 and outbound webhook subscriptions. Every request carries an API key \
                 (`Authorization: Bearer svc_...`) issued to one customer with fixed \
                 scopes, or an OAuth 2.0 access token of a client issued the same way \
                 (`POST /oauth/token`, client credentials); every row returned belongs to \
                 that customer. Lists page with \
                 cursors (`after`), can be kept in sync by modification time \
                 (`modifiedSince`, `meta.syncedThrough`), and answer conditional requests \
                 (`ETag`, `If-None-Match`). This document is served at \
                 `/api/v1/openapi.json`: generate a client from it."
                    .to_owned(),
            ),
            contact: Some(Contact {
                name: Some("The team that runs this posture instance".to_owned()),
                ..Contact::default()
            }),
            license: Some(License {
                name: "Apache-2.0".to_owned(),
                url: Some("https://www.apache.org/licenses/LICENSE-2.0".to_owned()),
                ..License::default()
            }),
            ..Info::default()
        },
        // Relative: the instance serving this document (every path starts with /api/v1).
        servers: vec![Server {
            url: "/".to_owned(),
            description: Some("This posture instance".to_owned()),
            ..Server::default()
        }],
        paths: Some(Paths {
            paths,
            ..Paths::default()
        }),
        webhooks,
        components: Some(Components {
            schemas,
            security_schemes,
            headers: headers::components(),
            ..Components::default()
        }),
        tags: tags
            .into_iter()
            .map(|name| Tag {
                description: tag_description(&name).map(str::to_owned),
                name,
                ..Tag::default()
            })
            .collect(),
        ..OpenApi::default()
    }
}

/// Rebuilds every object with its keys in sorted order.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// The fields of the document's schemas no example value is known for (a test keeps it
/// empty: see `examples.rs`).
pub fn fields_without_examples() -> Vec<String> {
    let mut value = serde_json::to_value(document()).expect("the OpenAPI model serialises");
    examples::add_to_document(&mut value)
}

/// The canonical text of the document (rendered once per process, when the API's state is
/// built).
/// The `oauth2` security scheme (written here: aide's model renders an absent `refreshUrl`
/// as `null`, which OpenAPI does not allow).
fn oauth_scheme() -> serde_json::Value {
    let scopes: serde_json::Map<String, serde_json::Value> = posture_domain::Scope::ALL
        .iter()
        .map(|scope| (scope.as_str().to_owned(), scope.grants().into()))
        .collect();
    serde_json::json!({
        "type": "oauth2",
        "description": "OAuth 2.0 client credentials: a client issued by a customer admin \
            exchanges its secret, or a JWT signed with its private key (private_key_jwt), at \
            `POST /oauth/token` for an access token that lives minutes, sent as \
            `Authorization: Bearer pat_...`. It holds the client's scopes, or those the token \
            request's `scope` names. Metadata: `/.well-known/oauth-authorization-server`.",
        "flows": {
            "clientCredentials": {
                "tokenUrl": crate::oauth::TOKEN_PATH,
                "scopes": scopes,
            }
        }
    })
}

pub fn render() -> String {
    // aide's model is plain data with string keys: serialising it cannot fail, and a
    // contract that silently became empty would be worse than stopping.
    let mut value = serde_json::to_value(document()).expect("the OpenAPI model serialises");
    examples::add_to_document(&mut value);
    named_sets::point_at_components(&mut value);
    webhooks::declare_signed(&mut value);
    value["components"]["securitySchemes"][OAUTH_SCHEME] = oauth_scheme();
    let mut text = serde_json::to_string_pretty(&sorted(value)).expect("a JSON value serialises");
    text.push('\n');
    text
}
