//! What the SCIM handlers share: reading a request (its body, its `If-Match`, the attributes
//! and window it asks for) and answering in SCIM's shape.

use actix_web::{
    HttpRequest, HttpResponse,
    http::{
        StatusCode,
        header::{self, HeaderValue},
    },
    web,
};
use futures_util::StreamExt as _;
use posture_domain::scim::{ListWindow, PatchRequest};
use serde_json::Value;

use super::{
    error::{self, ScimError},
    render,
};
use crate::{error::ApiError, state::ApiState};

/// Where SCIM is served.
pub const PREFIX: &str = "/scim/v2";
/// Largest SCIM request body (a group's creation or a PATCH naming up to 1,000 members).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The service's URL up to `/scim/v2`: from `POSTURE_PUBLIC_URL` when it is set (a
/// request's `Host` must not choose the URLs an identity provider stores), else as the
/// client reached it (forwarding headers believed from the trusted proxies only).
pub(crate) fn base(req: &HttpRequest) -> String {
    let state = req.app_data::<web::Data<ApiState>>();
    if let Some(public) = state.and_then(|state| state.public_url.as_deref()) {
        return format!("{public}{PREFIX}");
    }
    let trusted = state
        .map(|state| state.trusted_proxies.clone())
        .unwrap_or_default();
    let (scheme, host) = crate::client_ip::request_origin(req, &trusted);
    format!("{scheme}://{host}{PREFIX}")
}

/// An answer with a SCIM body; `version` sets the `ETag`.
pub(crate) fn answer(status: StatusCode, body: &Value, version: Option<u64>) -> HttpResponse {
    let mut response = HttpResponse::build(status);
    response.content_type(error::CONTENT_TYPE);
    if let Some(tag) = version.and_then(|v| HeaderValue::from_str(&render::etag(v)).ok()) {
        response.insert_header((header::ETAG, tag));
    }
    if status == StatusCode::CREATED
        && let Some(location) = body["meta"]["location"]
            .as_str()
            .and_then(|l| HeaderValue::from_str(l).ok())
    {
        response.insert_header((header::LOCATION, location));
    }
    response.body(body.to_string())
}

/// The versions `If-Match` names: `None` without the header or with `*`. Every tag of the
/// list counts (RFC 9110 13.1.1), weak or strong, as SCIM clients echo them; a tag that is
/// not one of posture's names no version, so a list of only those matches none (412).
pub(crate) fn if_match(req: &HttpRequest) -> Option<Vec<u64>> {
    let mut given = req.headers().get_all(header::IF_MATCH).peekable();
    given.peek()?;
    let mut versions = Vec::new();
    for value in given {
        for tag in value.to_str().unwrap_or("\"\"").split(',') {
            match tag.trim() {
                "*" => return None,
                tag => versions.extend(tag_version(tag)),
            }
        }
    }
    Some(versions)
}

/// The 304 of a GET whose `If-None-Match` holds the resource's tag, with the tag.
pub(crate) fn unchanged(version: u64) -> HttpResponse {
    let mut response = HttpResponse::NotModified();
    if let Ok(tag) = HeaderValue::from_str(&render::etag(version)) {
        response.insert_header((header::ETAG, tag));
    }
    response.finish()
}

/// Whether `If-None-Match` holds the resource's tag (a GET is then answered 304).
pub(crate) fn not_modified(req: &HttpRequest, version: u64) -> bool {
    req.headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|t| t.trim() == "*" || tag_version(t.trim()) == Some(version))
        })
}

fn tag_version(tag: &str) -> Option<u64> {
    let tag = tag.strip_prefix("W/").unwrap_or(tag);
    tag.strip_prefix('"')?.strip_suffix('"')?.parse().ok()
}

/// The body of a PATCH, as RFC 7644 §3.5.2 shapes it.
pub(crate) async fn patch_body(
    req: &HttpRequest,
    payload: web::Payload,
) -> Result<PatchRequest, ScimError> {
    serde_json::from_value(json_body(req, payload).await?)
        .map_err(|e| ScimError::bad_request("invalidSyntax", format!("a PATCH body: {e}")))
}

/// A request's JSON body, read up to [`MAX_BODY_BYTES`].
pub(crate) async fn json_body(
    req: &HttpRequest,
    mut payload: web::Payload,
) -> Result<Value, ScimError> {
    if let Some(kind) = req.headers().get(header::CONTENT_TYPE) {
        let kind = kind.to_str().unwrap_or_default().to_ascii_lowercase();
        let essence = kind.split(';').next().unwrap_or_default().trim();
        if essence != "application/json" && essence != "application/scim+json" {
            return Err(ApiError::UnsupportedMediaType(
                "a SCIM body is application/scim+json or application/json".to_owned(),
            )
            .into());
        }
    }
    let too_large = || {
        ScimError::from(ApiError::PayloadTooLarge(format!(
            "a SCIM body is at most {MAX_BODY_BYTES} bytes"
        )))
    };
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if announced.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(too_large());
    }
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk
            .map_err(|_| ScimError::bad_request("invalidSyntax", "the body could not be read"))?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| {
        ScimError::bad_request(
            "invalidSyntax",
            format!(
                "the body is not JSON (line {}, column {})",
                e.line(),
                e.column()
            ),
        )
    })
}

/// Which attributes an answer shows (`attributes`, `excludedAttributes`: RFC 7644 §3.9).
#[derive(Default)]
pub(crate) struct Shape {
    pub(super) attributes: Vec<String>,
    pub(super) excluded: Vec<String>,
}

impl Shape {
    pub(super) fn new(attributes: Vec<String>, excluded: Vec<String>) -> Self {
        Self {
            attributes,
            excluded,
        }
    }

    /// Whether the request names the attributes it wants.
    pub(crate) fn asks(&self) -> bool {
        !self.attributes.is_empty()
    }

    /// Whether a group's members are shown (they cost a read: not when left out).
    pub(crate) fn members(&self) -> bool {
        let names_members = |list: &[String]| {
            list.iter()
                .any(|a| a == "members" || a.starts_with("members."))
        };
        !self.excluded.iter().any(|a| a == "members")
            && (self.attributes.is_empty() || names_members(&self.attributes))
    }

    /// The resource as the request asks to see it.
    pub(crate) fn apply(&self, mut resource: Value) -> Value {
        render::project(&mut resource, &self.attributes, &self.excluded);
        resource
    }
}

/// The list parameters (RFC 7644 §3.4.2), from the query string (names in any case;
/// others ignored) or a search's body.
pub(crate) struct ListParams {
    pub(crate) filter: Option<String>,
    pub(crate) window: ListWindow,
    pub(crate) shape: Shape,
}

/// A query string's parameters.
struct Query(Vec<(String, String)>);

impl Query {
    fn of(req: &HttpRequest) -> Result<Self, ScimError> {
        serde_urlencoded::from_str(req.query_string())
            .map(Self)
            .map_err(|_| ScimError::bad_request("invalidValue", "the query string is malformed"))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn number(&self, name: &'static str) -> Result<Option<i64>, ScimError> {
        self.get(name)
            .map(|v| {
                v.trim().parse::<i64>().map_err(|_| {
                    ScimError::bad_request("invalidValue", format!("{name} is an integer"))
                })
            })
            .transpose()
    }

    fn shape(&self) -> Shape {
        Shape::new(
            render::attribute_list(self.get("attributes")),
            render::attribute_list(self.get("excludedAttributes")),
        )
    }
}

/// The `attributes`/`excludedAttributes` of a request's query string.
pub(crate) fn shape_of(req: &HttpRequest) -> Result<Shape, ScimError> {
    Ok(Query::of(req)?.shape())
}

impl ListParams {
    pub(crate) fn of(req: &HttpRequest) -> Result<Self, ScimError> {
        let query = Query::of(req)?;
        Ok(Self {
            filter: query.get("filter").map(str::to_owned),
            window: ListWindow::new(query.number("startIndex")?, query.number("count")?),
            shape: query.shape(),
        })
    }

    /// A search's body (`POST .search`, RFC 7644 §3.4.3).
    pub(crate) async fn of_search(
        req: &HttpRequest,
        payload: web::Payload,
    ) -> Result<Self, ScimError> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Search {
            #[serde(default)]
            attributes: Vec<String>,
            #[serde(default)]
            excluded_attributes: Vec<String>,
            filter: Option<String>,
            start_index: Option<i64>,
            count: Option<i64>,
        }
        let search: Search = serde_json::from_value(json_body(req, payload).await?)
            .map_err(|e| ScimError::bad_request("invalidSyntax", format!("a search body: {e}")))?;
        Ok(Self {
            filter: search.filter,
            window: ListWindow::new(search.start_index, search.count),
            shape: Shape::new(
                render::attribute_list(search.attributes.iter().map(String::as_str)),
                render::attribute_list(search.excluded_attributes.iter().map(String::as_str)),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_shown_unless_left_out() {
        let shape = |attributes: &str, excluded: &str| {
            Shape::new(
                render::attribute_list([attributes]),
                render::attribute_list([excluded]),
            )
            .members()
        };
        assert!(shape("", ""));
        assert!(!shape("", "members"));
        assert!(!shape("", "displayName, Members"));
        assert!(!shape("displayName", ""));
        assert!(shape("displayName,members.value", ""));
        assert!(shape("", "externalId"));
    }

    #[test]
    fn tags_are_read_weak_or_strong() {
        assert_eq!(tag_version("W/\"3\""), Some(3));
        assert_eq!(tag_version("\"3\""), Some(3));
        assert_eq!(tag_version("3"), None);
        assert_eq!(tag_version("W/\"x\""), None);
    }
}
