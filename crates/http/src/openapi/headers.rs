//! Response headers of the contract, as reusable components.

use aide::openapi::{Header, ParameterSchemaOrContent, ReferenceOr, SchemaObject};
use indexmap::IndexMap;
use serde_json::{Value, json};

/// A header: name, description, schema.
type HeaderSpec = (&'static str, &'static str, fn() -> Value);

/// Every header the API sends.
const HEADERS: &[HeaderSpec] = &[
    (
        "X-RateLimit-Limit",
        "Requests allowed per window in the bucket this request counted against (its key's, or its client address's without a valid key).",
        || json!({"type": "integer", "minimum": 1}),
    ),
    (
        "X-RateLimit-Remaining",
        "Requests left in the current window.",
        || json!({"type": "integer", "minimum": 0}),
    ),
    (
        "X-RateLimit-Reset",
        "Unix time, in seconds, at which the current window ends.",
        || json!({"type": "integer", "minimum": 0}),
    ),
    (
        "RateLimit-Policy",
        "IETF draft field: `\"per-key\";q=<limit>;w=<window seconds>` (`per-address` without a valid key).",
        || json!({"type": "string"}),
    ),
    (
        "RateLimit",
        "IETF draft field: `\"per-key\";r=<remaining>;t=<seconds until the window ends>`.",
        || json!({"type": "string"}),
    ),
    (
        "X-Request-Id",
        "The request's id (the caller's own `X-Request-Id` when it is a short token).",
        || json!({"type": "string", "maxLength": 64}),
    ),
    (
        "Cache-Control",
        "Responses are never cached.",
        || json!({"type": "string", "const": "no-store"}),
    ),
    (
        "Retry-After",
        "Seconds to wait before retrying (at least 1).",
        || json!({"type": "integer", "minimum": 1}),
    ),
    (
        "WWW-Authenticate",
        "`Bearer` (401) or `Bearer error=\"insufficient_scope\", scope=\"...\"` (403).",
        || json!({"type": "string"}),
    ),
    (
        "Location",
        "The path of the created resource.",
        || json!({"type": "string"}),
    ),
    (
        "Content-Disposition",
        "`attachment; filename=\"findings-<date>.ndjson\"` (or `.cef`).",
        || json!({"type": "string"}),
    ),
    (
        "X-Total-Count",
        "Number of lines in the body.",
        || json!({"type": "integer", "minimum": 0}),
    ),
    (
        "X-Synced-Through",
        "The `modifiedAt` of the customer's newest analyzer pass in the export's snapshot: send it as `modifiedSince` next time to export only what changed. Absent before the first pass.",
        || json!({"type": "string", "format": "date-time"}),
    ),
    (
        "ETag",
        "Tag of the response. On the read routes a weak tag (`W/\"...\"`): send it back as `If-None-Match` to get 304 while nothing it shows has changed (tags are per key and per query). On a webhook subscription a strong tag (`\"v3\"`), the same for every key: send it as `If-Match` to change the subscription only if nobody else did, or as `If-None-Match`.",
        || json!({"type": "string"}),
    ),
    (
        "Link",
        "`<path?...&after=<cursor>>; rel=\"next\"` (RFC 8288) when more rows follow: the next page, with the same other parameters.",
        || json!({"type": "string"}),
    ),
    (
        "Idempotent-Replayed",
        "`true` on an answer given again for a retry with the same `Idempotency-Key`: the request did not act again.",
        || json!({"type": "string", "const": "true"}),
    ),
];

/// Sent only when they apply (a next page, a pass to sync through, a replay): not
/// `required`.
const CONDITIONAL: &[&str] = &["Link", "X-Synced-Through", "Idempotent-Replayed"];

/// Sent on every `/api/v1` response.
pub(super) const ALWAYS: &[&str] = &[
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "RateLimit-Policy",
    "RateLimit",
    "X-Request-Id",
    "Cache-Control",
];

/// The headers of an error response of `status`, beyond [`ALWAYS`].
pub(super) fn for_error(status: u16) -> &'static [&'static str] {
    match status {
        401 | 403 => &["WWW-Authenticate"],
        429 | 503 => &["Retry-After"],
        _ => &[],
    }
}

/// The `components.headers` entries.
pub(super) fn components() -> IndexMap<String, ReferenceOr<Header>> {
    HEADERS
        .iter()
        .map(|(name, description, schema)| {
            let header = Header {
                description: Some((*description).to_owned()),
                style: Default::default(),
                required: !CONDITIONAL.contains(name),
                deprecated: None,
                format: ParameterSchemaOrContent::Schema(SchemaObject {
                    json_schema: schemars::Schema::try_from(schema())
                        .expect("a header schema is a JSON object"),
                    external_docs: None,
                    example: None,
                }),
                example: None,
                examples: IndexMap::new(),
                extensions: IndexMap::new(),
            };
            ((*name).to_owned(), ReferenceOr::Item(header))
        })
        .collect()
}

/// References to the named header components.
pub(super) fn references<'a>(
    names: impl IntoIterator<Item = &'a &'a str>,
) -> IndexMap<String, ReferenceOr<Header>> {
    names
        .into_iter()
        .map(|name| {
            let reference = ReferenceOr::Reference {
                reference: format!("#/components/headers/{name}"),
                summary: None,
                description: None,
            };
            ((*name).to_owned(), reference)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_header_used_is_a_component() {
        let known: Vec<&str> = HEADERS.iter().map(|h| h.0).collect();
        for name in ALWAYS.iter().chain(for_error(401)).chain(for_error(429)) {
            assert!(known.contains(name), "{name}");
        }
    }
}
