//! Request bodies: JSON read with a size limit, then deserialised by the type that documents
//! it (`Json(request): Json<CreateWebhookRequest>`), so the contract and the parser are one
//! declaration.
//!
//! * no body at all (no content, whatever the `Content-Type`) → the body `{}` when every field
//!   of `T` is optional, as the contract says (`requestBody.required: false`): an operation
//!   whose body is all optional accepts none; otherwise as below;
//! * not `application/json` (or `application/*+json`) → 415;
//! * over [`MAX_BODY_BYTES`](crate::MAX_BODY_BYTES) → 413 (checked on `Content-Length` and
//!   while streaming);
//! * not JSON → 400;
//! * JSON that does not fit the type (not an object, a missing, unknown or wrongly typed
//!   field) → 422 whose reason names the field's path (`eventTypes[0]: invalid type: ...`).

use actix_web::{FromRequest, HttpRequest, dev::Payload, http::header, web};
use futures_util::{StreamExt as _, future::LocalBoxFuture};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;

use crate::{MAX_BODY_BYTES, error::ApiError};

/// The JSON body of a route, as the route table declares it.
pub struct Body {
    pub description: &'static str,
    pub schema: fn(&mut SchemaGenerator) -> Schema,
}

impl Body {
    /// A JSON body of type `T`.
    pub const fn json<T: JsonSchema>(description: &'static str) -> Self {
        Self {
            description,
            schema: body_schema::<T>,
        }
    }
}

fn body_schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

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
        let chunk = chunk.map_err(|_| ApiError::invalid("the body could not be read"))?;
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
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("the body is not valid JSON ({e})")))?;
    // Serde would read a struct from an array of its fields in order: every body is an
    // object, as every body schema says.
    if !value.is_object() {
        return Err(ApiError::Unprocessable(
            "the body must be a JSON object".to_owned(),
        ));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let reason = e.inner().to_string();
        let mut path = e.path().to_string();
        // An unknown field's path ends with the field, which the reason names already.
        if let (true, Some(Segment::Map { key })) = (
            reason.starts_with("unknown field"),
            e.path().iter().next_back(),
        ) {
            path = path
                .strip_suffix(key.as_str())
                .unwrap_or(&path)
                .trim_end_matches('.')
                .to_owned();
        }
        ApiError::Unprocessable(if path.is_empty() || path == "." {
            reason
        } else {
            format!("{path}: {reason}")
        })
    })
}

/// A JSON body deserialised into `T`.
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

    fn unprocessable(body: serde_json::Value) -> String {
        match decode::<CreateWebhookRequest>(body.to_string().as_bytes()) {
            Err(ApiError::Unprocessable(reason)) => reason,
            other => panic!("expected 422, got {:?}", other.map(|_| ())),
        }
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
