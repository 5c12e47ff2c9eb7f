//! SCIM's errors (RFC 7644 §3.12): `{schemas, status, scimType?, detail?}` as
//! `application/scim+json`. Not `/api/v1`'s `{error, reason}`: SCIM clients read RFC 7644's
//! shape, and strict ones (scim2-models) refuse any other member; `detail` says what
//! `reason` would. The status and headers (`WWW-Authenticate`, `Retry-After`) are the API's:
//! a domain error maps here exactly as it does there.

use actix_web::{
    HttpResponse, ResponseError,
    body::BoxBody,
    http::{StatusCode, header},
};
use posture_domain::{Error, Refusal};
use serde_json::json;

use crate::error::{ApiError, Refused};

pub(crate) const ERROR_URN: &str = "urn:ietf:params:scim:api:messages:2.0:Error";
pub(crate) const CONTENT_TYPE: &str = "application/scim+json";

/// An error answered to an identity provider.
#[derive(Debug)]
pub(crate) struct ScimError {
    api: ApiError,
    scim_type: Option<&'static str>,
}

impl ScimError {
    /// A 400 of a kind RFC 7644 names (`invalidFilter`, `invalidSyntax`, ...).
    pub(crate) fn bad_request(scim_type: &'static str, detail: impl Into<String>) -> Self {
        Self {
            api: ApiError::InvalidRequest(Refused::whole(Refusal::Invalid, detail)),
            scim_type: Some(scim_type),
        }
    }

    pub(crate) fn not_found() -> Self {
        Self {
            api: ApiError::NotFound(Some("no such resource")),
            scim_type: None,
        }
    }
}

impl std::fmt::Display for ScimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.api.fmt(f)
    }
}

impl From<ApiError> for ScimError {
    fn from(api: ApiError) -> Self {
        Self {
            api,
            scim_type: None,
        }
    }
}

impl From<Error> for ScimError {
    fn from(e: Error) -> Self {
        match e {
            Error::NotFound => Self::not_found(),
            Error::Invalid { field, reason, .. } => {
                let scim_type = match field.as_ref() {
                    "filter" => "invalidFilter",
                    "page" => "tooMany",
                    "path" => "invalidPath",
                    "target" => "noTarget",
                    "body" | "op" | "Operations" => "invalidSyntax",
                    _ => "invalidValue",
                };
                Self::bad_request(scim_type, format!("{field}: {reason}"))
            }
            Error::Conflict(reason) => Self {
                api: ApiError::Conflict(reason),
                scim_type: Some("uniqueness"),
            },
            other => ApiError::from(other).into(),
        }
    }
}

impl ResponseError for ScimError {
    fn status_code(&self) -> StatusCode {
        self.api.status_code()
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = self.api.error_response();
        let api = self.api.body();
        let status = self.status_code();
        let mut body = json!({
            "schemas": [ERROR_URN],
            "status": status.as_str(),
        });
        if let Some(scim_type) = self.scim_type {
            body["scimType"] = scim_type.into();
        }
        if let Some(reason) = api.reason {
            body["detail"] = reason.into();
        }
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static(CONTENT_TYPE),
        );
        response.set_body(BoxBody::new(body.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use actix_web::body::MessageBody as _;

    use super::*;

    fn body_of(e: ScimError) -> (StatusCode, serde_json::Value) {
        let response = e.error_response();
        let status = response.status();
        let bytes = response.into_body().try_into_bytes().unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[test]
    fn a_taken_name_is_a_uniqueness_conflict_in_rfc_7644s_shape() {
        let (status, body) = body_of(Error::Conflict("userName \"a\" is taken".into()).into());
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(body["schemas"][0], ERROR_URN);
        assert_eq!(body["status"], "409");
        assert_eq!(body["scimType"], "uniqueness");
        assert!(body["detail"].as_str().unwrap().contains("taken"));
        let members: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(members, ["schemas", "status", "scimType", "detail"]);
    }

    #[test]
    fn a_refused_field_names_its_scim_type() {
        for (field, scim_type) in [
            ("filter", "invalidFilter"),
            ("path", "invalidPath"),
            ("Operations", "invalidSyntax"),
            ("members", "invalidValue"),
        ] {
            let (status, body) = body_of(Error::invalid(field, "is wrong").into());
            assert_eq!(status, StatusCode::BAD_REQUEST);
            assert_eq!(body["scimType"], scim_type);
            assert_eq!(body["status"], "400");
        }
    }
}
