//! The error body: `{error, reason?, field?, kind?}` with the matching HTTP status.

use posture_domain::Refusal;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;

/// Machine-readable error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    InvalidRequest,
    Unauthorized,
    InsufficientScope,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    Conflict,
    PreconditionFailed,
    PayloadTooLarge,
    UnsupportedMediaType,
    UnprocessableEntity,
    RateLimited,
    Internal,
    Unavailable,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::InvalidRequest,
        ErrorCode::Unauthorized,
        ErrorCode::InsufficientScope,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Conflict,
        ErrorCode::PreconditionFailed,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::UnprocessableEntity,
        ErrorCode::RateLimited,
        ErrorCode::Internal,
        ErrorCode::Unavailable,
    ];

    /// The code on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::InsufficientScope => "insufficient_scope",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::Conflict => "conflict",
            ErrorCode::PreconditionFailed => "precondition_failed",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::UnprocessableEntity => "unprocessable_entity",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Internal => "internal",
            ErrorCode::Unavailable => "unavailable",
        }
    }

    /// Its status and what it means.
    pub fn meaning(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => {
                "400: a parameter or body field is malformed or out of range."
            }
            ErrorCode::Unauthorized => {
                "401: missing, malformed, unknown, revoked or expired key (or one unused longer \
                 than its customer allows: the reason says so)."
            }
            ErrorCode::InsufficientScope => "403: the key lacks the route's scope.",
            ErrorCode::Forbidden => {
                "403: the key (or OAuth client) may not be used from the request's address: \
                 its allow-list does not name it."
            }
            ErrorCode::NotFound => "404: no such route or resource for this customer.",
            ErrorCode::MethodNotAllowed => "405: the path exists but not with this method.",
            ErrorCode::Conflict => "409: the request conflicts with the current state.",
            ErrorCode::PreconditionFailed => {
                "412: `If-Match` does not hold: the resource changed since its `ETag` was read."
            }
            ErrorCode::PayloadTooLarge => "413: the body is too large.",
            ErrorCode::UnsupportedMediaType => "415: the body is not JSON.",
            ErrorCode::UnprocessableEntity => {
                "422: the body is well-formed JSON but breaks a rule."
            }
            ErrorCode::RateLimited => {
                "429: a quota is used up: the key's (or address's) requests of the window, a \
                 budget of the customer's (`RateLimit-Policy` names the one that refused \
                 first), or the places a customer may hold at once (waits, exports)."
            }
            ErrorCode::Internal => "500: an unexpected error; details are logged, never returned.",
            ErrorCode::Unavailable => "503: a backing service is unreachable; retry later.",
        }
    }
}

/// A plain string enumeration (not a `oneOf` of constants, which client generators turn into
/// unions they cannot parse), the meanings in its description.
impl JsonSchema for ErrorCode {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ErrorCode".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let meanings: Vec<String> = Self::ALL
            .iter()
            .map(|code| format!("- `{}`: {}", code.as_str(), code.meaning()))
            .collect();
        let codes: Vec<&str> = Self::ALL.iter().map(|code| code.as_str()).collect();
        json_schema!({
            "type": "string",
            "enum": codes,
            "description": format!("Machine-readable error codes:\n\n{}", meanings.join("\n")),
        })
    }
}

/// Every 4xx and 5xx response has this body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ErrorResponse {
    pub error: ErrorCode,
    /// What was wrong, for a human; names the parameter, field or missing scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"unknown query parameter \"colour\"; allowed: limit, after")]
    pub reason: Option<String>,
    /// On a 400 or 422: the query parameter, header or body field refused (a body field by
    /// its path, e.g. `findings[2].id`); absent when the request as a whole is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(example = &"colour")]
    pub field: Option<String>,
    // On a 400 or 422: how the value was refused. A `//` comment: a doc comment would replace
    // the description `refusal_schema` writes (the kinds and their meanings).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "refusal_schema")]
    pub kind: Option<Refusal>,
}

/// A string, not an `enum`: the set of kinds may grow (additively), and a generated client
/// must read a kind it does not know rather than fail on it.
fn refusal_schema(_: &mut SchemaGenerator) -> Schema {
    let meanings: Vec<String> = Refusal::ALL
        .iter()
        .map(|kind| format!("- `{}`: {}.", kind.as_str(), kind.meaning()))
        .collect();
    json_schema!({
        "type": "string",
        "description": format!(
            "On a 400 or 422, how the value was refused, for programs; the set may grow, so \
             read a kind you do not know as `invalid`:\n\n{}",
            meanings.join("\n")
        ),
        "examples": ["unknown"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_written_as_serde_writes_it() {
        for kind in Refusal::ALL {
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::Value::from(kind.as_str())
            );
        }
    }

    #[test]
    fn every_code_is_written_as_serde_writes_it() {
        for code in ErrorCode::ALL {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::from(code.as_str())
            );
        }
    }
}
