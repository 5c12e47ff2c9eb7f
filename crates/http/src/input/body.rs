//! Request bodies: JSON read with a size limit, then deserialised by the type that documents
//! it (`Json(request): Json<CreateWebhookRequest>`), so the contract and the parser are one
//! declaration.
//!
//! * no body at all (no content, whatever the `Content-Type`) → the body `{}` when every field
//!   of `T` is optional, as the contract says (`requestBody.required: false`): an operation
//!   whose body is all optional accepts none; otherwise as below;
//! * not `application/json` (or `application/*+json`) → 415;
//! * over [`MAX_BODY_BYTES`] → 413 (checked on `Content-Length` and
//!   while streaming);
//! * not JSON → 400;
//! * JSON that does not fit the type (not an object, a missing, unknown or wrongly typed
//!   field) → 422 whose reason names the field's path (`eventTypes[0]: invalid type: ...`),
//!   and whose `field` and `kind` say so for programs. The kind comes from serde's own
//!   structured errors (`unknown_field`, `missing_field`, ...): the body is read into a
//!   `serde_value::Value` and deserialised with an error type that keeps them, where
//!   serde_json's would keep only their text.

use std::fmt;

use actix_web::{FromRequest, HttpRequest, dev::Payload, http::header, web};
use futures_util::{StreamExt as _, future::LocalBoxFuture};
use posture_domain::Refusal;
use schemars::{Schema, SchemaGenerator};
use serde::de::{self, DeserializeOwned, Unexpected};
use serde_path_to_error::Segment;

use crate::error::{ApiError, Refused};

/// Largest request body accepted anywhere: the largest body the contract allows fits, also
/// pretty-printed — a bulk triage of 500 findings with 128-character ids, each with its
/// 200-character `ifMatch`, and a comment of 2,000 four-byte characters sent as `\u`
/// escapes is about 210 KB (a test sends it).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// Whether a body schema (a `$ref` to a component of `generator`, or inline) requires no
/// field, so that the operation may be called without a body.
pub fn all_optional(schema: &Schema, generator: &SchemaGenerator) -> bool {
    let target = schema
        .get("$ref")
        .and_then(|r| r.as_str())
        .and_then(|r| r.rsplit('/').next())
        .and_then(|name| generator.definitions().get(name));
    let object = target.unwrap_or(schema.as_value());
    object
        .get("required")
        .and_then(|r| r.as_array())
        .is_none_or(Vec::is_empty)
}

fn too_large() -> ApiError {
    ApiError::PayloadTooLarge(format!(
        "the body must be at most {} KiB",
        MAX_BODY_BYTES / 1024
    ))
}

/// Whether the request says its body is JSON.
fn is_json(req: &HttpRequest) -> bool {
    let Some(value) = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or(value)
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Reads the whole body, refusing it past the limit.
async fn read(req: &HttpRequest, mut payload: Payload) -> Result<web::BytesMut, ApiError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(too_large());
    }
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|_| {
            ApiError::InvalidRequest(Refused::whole(
                Refusal::Malformed,
                "the body could not be read",
            ))
        })?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Deserialises a JSON body into `T`.
pub(crate) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    // Syntax first (400), then the shape (422): errors of the second step carry no
    // line/column noise, only the path.
    let value: serde_value::Value = serde_json::from_slice(body).map_err(|e| {
        let reason = format!("the body is not valid JSON ({e})");
        ApiError::InvalidRequest(Refused::whole(Refusal::Malformed, reason))
    })?;
    // Serde would read a struct from an array of its fields in order: every body is an
    // object, as every body schema says.
    if !matches!(value, serde_value::Value::Map(_)) {
        return Err(ApiError::Unprocessable(Refused::whole(
            Refusal::Malformed,
            "the body must be a JSON object",
        )));
    }
    let deserializer = serde_value::ValueDeserializer::<ShapeError>::new(value);
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let at = match e.path().to_string() {
            path if path == "." => String::new(),
            path => path,
        };
        let last_key = match e.path().iter().next_back() {
            Some(Segment::Map { key }) => Some(key.clone()),
            _ => None,
        };
        let shape = e.into_inner();
        // Where the value is: an unknown field's path ends with it already (and the reason
        // names it, so the reason's path leaves it out); a missing one's is its parent's.
        let (field, reason_at) = match shape.missing {
            Some(missing) if at.is_empty() => (missing.to_owned(), at),
            Some(missing) => (format!("{at}.{missing}"), at),
            None if shape.kind == Refusal::Unknown => {
                let parent = last_key
                    .and_then(|key| at.strip_suffix(key.as_str()))
                    .unwrap_or(&at)
                    .trim_end_matches('.')
                    .to_owned();
                (at, parent)
            }
            None => (at.clone(), at),
        };
        let reason = match reason_at.is_empty() {
            true => shape.message,
            false => format!("{reason_at}: {}", shape.message),
        };
        ApiError::Unprocessable(match field.is_empty() {
            true => Refused::whole(shape.kind, reason),
            false => Refused::field(shape.kind, field, reason),
        })
    })
}

/// What was found, named as JSON names it (`null`, where serde says "unit value"), as
/// serde_json's own errors do.
fn as_json(unexpected: Unexpected<'_>) -> Unexpected<'_> {
    match unexpected {
        Unexpected::Unit => Unexpected::Other("null"),
        other => other,
    }
}

/// A body that does not fit its type, with the kind serde said (serde's own texts).
#[derive(Debug)]
struct ShapeError {
    kind: Refusal,
    message: String,
    /// The field a `missing_field` names (the path is then its parent's).
    missing: Option<&'static str>,
}

impl ShapeError {
    fn new(kind: Refusal, message: impl fmt::Display) -> Self {
        Self {
            kind,
            message: message.to_string(),
            missing: None,
        }
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ShapeError {}

/// Each method keeps serde's text (`de::value::Error` writes the default one) and its kind.
impl de::Error for ShapeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Self::new(Refusal::Invalid, message)
    }

    fn invalid_type(unexpected: Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        let text = de::value::Error::invalid_type(as_json(unexpected), expected);
        Self::new(Refusal::Malformed, text)
    }

    fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        let unexpected = as_json(unexpected);
        let kind = match unexpected {
            // A number of the right type that its type cannot hold (300 for a u8).
            Unexpected::Unsigned(_) | Unexpected::Signed(_) | Unexpected::Float(_) => {
                Refusal::OutOfRange
            }
            _ => Refusal::Invalid,
        };
        Self::new(kind, de::value::Error::invalid_value(unexpected, expected))
    }

    fn invalid_length(len: usize, expected: &dyn de::Expected) -> Self {
        let text = de::value::Error::invalid_length(len, expected);
        Self::new(Refusal::OutOfRange, text)
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        let text = de::value::Error::unknown_variant(variant, expected);
        Self::new(Refusal::Invalid, text)
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        let text = de::value::Error::unknown_field(field, expected);
        Self::new(Refusal::Unknown, text)
    }

    fn missing_field(field: &'static str) -> Self {
        Self {
            missing: Some(field),
            ..Self::new(Refusal::Missing, de::value::Error::missing_field(field))
        }
    }

    fn duplicate_field(field: &'static str) -> Self {
        let text = de::value::Error::duplicate_field(field);
        Self::new(Refusal::Repeated, text)
    }
}

/// A JSON body deserialised into `T`, whose schema the contract states.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for Json<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let req = req.clone();
        let payload = payload.take();
        Box::pin(async move {
            let json = is_json(&req);
            let body = read(&req, payload).await?;
            if body.is_empty()
                && let Ok(empty) = decode::<T>(b"{}")
            {
                // Every field is optional: no body is the empty object.
                return Ok(Json(empty));
            }
            if !json {
                return Err(ApiError::UnsupportedMediaType(
                    "the body must be JSON: send Content-Type: application/json".to_owned(),
                ));
            }
            decode(&body).map(Json)
        })
    }
}

#[cfg(test)]
mod tests {
    use posture_wire::webhooks::CreateWebhookRequest;
    use serde_json::json;

    use super::*;

    fn refused(body: serde_json::Value) -> Refused {
        match decode::<CreateWebhookRequest>(body.to_string().as_bytes()) {
            Err(ApiError::Unprocessable(refused)) => refused,
            other => panic!("expected 422, got {:?}", other.map(|_| ())),
        }
    }

    fn unprocessable(body: serde_json::Value) -> String {
        refused(body).reason
    }

    fn field_and_kind(body: serde_json::Value) -> (Option<String>, Refusal) {
        let refused = refused(body);
        (refused.field.map(|f| f.into_owned()), refused.kind)
    }

    fn valid() -> serde_json::Value {
        json!({"name": "n", "webhookUrl": "https://e.com/", "webhookType": "generic",
               "eventTypes": ["finding_low"]})
    }

    #[test]
    fn a_wrongly_typed_item_is_named_by_its_path() {
        let mut body = valid();
        body["eventTypes"] = json!(["finding_low", 7]);
        let reason = unprocessable(body);
        assert!(
            reason.starts_with("eventTypes[1]: invalid type"),
            "{reason}"
        );
    }

    #[test]
    fn an_unknown_or_missing_field_is_named() {
        let mut body = valid();
        body["secret"] = json!("mine");
        assert!(unprocessable(body).contains("unknown field `secret`"));
        let mut body = valid();
        body.as_object_mut().unwrap().remove("webhookType");
        assert!(unprocessable(body).contains("missing field `webhookType`"));
    }

    #[test]
    fn programs_read_the_field_and_the_kind_serde_said() {
        let field = |f: &str| Some(f.to_owned());
        let mut body = valid();
        body["secret"] = json!("mine");
        assert_eq!(field_and_kind(body), (field("secret"), Refusal::Unknown));
        let mut body = valid();
        body.as_object_mut().unwrap().remove("webhookType");
        assert_eq!(
            field_and_kind(body),
            (field("webhookType"), Refusal::Missing)
        );
        let mut body = valid();
        body["eventTypes"] = json!(["finding_low", 7]);
        assert_eq!(
            field_and_kind(body),
            (field("eventTypes[1]"), Refusal::Malformed)
        );
        assert_eq!(field_and_kind(json!([1])), (None, Refusal::Malformed));
    }

    #[test]
    fn a_number_its_type_cannot_hold_is_out_of_range() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Nested {
            #[expect(dead_code, reason = "read by serde only")]
            small: u8,
        }
        #[derive(Debug, serde::Deserialize)]
        struct Outer {
            #[expect(dead_code, reason = "read by serde only")]
            inner: Nested,
        }
        let refuse = |body: serde_json::Value| match decode::<Outer>(body.to_string().as_bytes()) {
            Err(ApiError::Unprocessable(refused)) => refused,
            other => panic!("expected 422, got {:?}", other.map(|_| ())),
        };
        let refused = refuse(json!({"inner": {"small": 300}}));
        assert_eq!(refused.field.as_deref(), Some("inner.small"));
        assert_eq!(refused.kind, Refusal::OutOfRange);
        // An unknown nested field: the field names it, the reason names it once.
        let refused = refuse(json!({"inner": {"small": 1, "big": 2}}));
        assert_eq!(refused.field.as_deref(), Some("inner.big"));
        assert_eq!(refused.kind, Refusal::Unknown);
        assert!(
            refused.reason.starts_with("inner: unknown field `big`"),
            "{}",
            refused.reason
        );
        // A missing nested field: its parent's path, then the field.
        let refused = refuse(json!({"inner": {}}));
        assert_eq!(refused.field.as_deref(), Some("inner.small"));
        assert_eq!(refused.reason, "inner: missing field `small`");
    }

    #[test]
    fn broken_json_is_400_not_422() {
        assert!(matches!(
            decode::<CreateWebhookRequest>(b"{\"name\": "),
            Err(ApiError::InvalidRequest(_))
        ));
    }

    #[test]
    fn json_media_types_are_recognised_case_insensitively() {
        let with = |value: &str| {
            let req = actix_web::test::TestRequest::default()
                .insert_header((header::CONTENT_TYPE, value))
                .to_http_request();
            is_json(&req)
        };
        assert!(with("application/json"));
        assert!(with("Application/JSON; charset=utf-8"));
        assert!(with("application/merge-patch+json"));
        assert!(!with("text/plain"));
        assert!(!with("application/jsonx"));
    }
}
