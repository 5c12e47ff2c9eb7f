//! Request bodies: JSON objects read with a size limit, then taken field by field, so every
//! error names what was wrong.
//!
//! * not `application/json` (or `application/*+json`) → 415;
//! * over [`MAX_BODY_BYTES`](crate::MAX_BODY_BYTES) → 413 (checked on `Content-Length` and
//!   while streaming);
//! * not JSON → 400; JSON but not an object, a missing, unknown or wrongly typed field →
//!   422 naming the field.

use actix_web::{HttpRequest, http::header, web};
use futures_util::StreamExt as _;
use serde_json::{Map, Value};

use crate::{MAX_BODY_BYTES, error::ApiError};

fn too_large() -> ApiError {
    ApiError::PayloadTooLarge(format!(
        "the body must be at most {} KiB",
        MAX_BODY_BYTES / 1024
    ))
}

/// Reads the body as a JSON object.
pub(crate) async fn json_object(
    req: &HttpRequest,
    mut payload: web::Payload,
) -> Result<Fields, ApiError> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    let is_json = content_type == "application/json"
        || (content_type.starts_with("application/") && content_type.ends_with("+json"));
    if !is_json {
        return Err(ApiError::UnsupportedMediaType(
            "the body must be JSON: send Content-Type: application/json".to_owned(),
        ));
    }
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
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::invalid(format!("the body is not valid JSON ({e})")))?;
    match value {
        Value::Object(map) => Ok(Fields(map)),
        _ => Err(ApiError::Unprocessable(
            "the body must be a JSON object".to_owned(),
        )),
    }
}

/// The fields of a JSON object body, taken one by one.
pub(crate) struct Fields(Map<String, Value>);

impl Fields {
    fn take(&mut self, name: &str) -> Result<Value, ApiError> {
        match self.0.remove(name) {
            None | Some(Value::Null) => Err(ApiError::Unprocessable(format!("{name} is required"))),
            Some(value) => Ok(value),
        }
    }

    pub(crate) fn string(&mut self, name: &str) -> Result<String, ApiError> {
        match self.take(name)? {
            Value::String(s) => Ok(s),
            _ => Err(ApiError::Unprocessable(format!("{name} must be a string"))),
        }
    }

    pub(crate) fn strings(&mut self, name: &str) -> Result<Vec<String>, ApiError> {
        let wrong = || ApiError::Unprocessable(format!("{name} must be an array of strings"));
        match self.take(name)? {
            Value::Array(items) => items
                .into_iter()
                .map(|item| match item {
                    Value::String(s) => Ok(s),
                    _ => Err(wrong()),
                })
                .collect(),
            _ => Err(wrong()),
        }
    }

    /// Fails on any field not taken.
    pub(crate) fn finish(self, allowed: &[&str]) -> Result<(), ApiError> {
        match self.0.keys().next() {
            None => Ok(()),
            Some(name) => Err(ApiError::Unprocessable(format!(
                "unknown field {name:?}; allowed: {}",
                allowed.join(", ")
            ))),
        }
    }
}
