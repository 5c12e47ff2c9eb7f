//! Strong entity tags of webhook subscriptions, and the preconditions on them: `If-Match`
//! guards a change against a concurrent one (412 when the subscription changed since the
//! caller read its tag), `If-None-Match` answers a read that is current with 304.
//!
//! A subscription's tag is `"v<version>"`: its version counts the changes a consumer can see
//! (a trigger bumps it), so the tag is strong — equal tags, equal representations.

use actix_web::{
    HttpRequest, HttpResponse,
    http::header::{self, EntityTag, Header as _, IfMatch, IfNoneMatch},
};

use crate::error::ApiError;

/// The tag of a subscription at `version`.
pub fn subscription_tag(version: u32) -> EntityTag {
    EntityTag::new_strong(format!("v{version}"))
}

/// The versions the request's `If-Match` accepts: `None` without the header (or an empty
/// one) or with `*` (any current subscription). Weak tags never match (strong comparison, RFC 9110 13.1.1),
/// nor do tags posture did not make: with only those, no version is accepted (412).
pub fn if_match(req: &HttpRequest) -> Result<Option<Vec<u32>>, ApiError> {
    // An empty field (`If-Match:`) states nothing: it is taken as no precondition.
    let given = req
        .headers()
        .get_all(header::IF_MATCH)
        .any(|v| !v.as_bytes().iter().all(u8::is_ascii_whitespace));
    if !given {
        return Ok(None);
    }
    match IfMatch::parse(req) {
        Ok(IfMatch::Any) => Ok(None),
        Ok(IfMatch::Items(items)) if !items.is_empty() => Ok(Some(
            items
                .iter()
                .filter(|tag| !tag.weak)
                .filter_map(|tag| tag.tag().strip_prefix('v')?.parse().ok())
                .collect(),
        )),
        Ok(IfMatch::Items(_)) | Err(_) => Err(ApiError::invalid(
            "If-Match: must be * or entity tags such as \"v3\" (the subscription's ETag)",
        )),
    }
}

/// Whether the request's `If-None-Match` holds `tag` (weak comparison).
fn not_modified(req: &HttpRequest, tag: &EntityTag) -> bool {
    match IfNoneMatch::parse(req) {
        Ok(IfNoneMatch::Items(items)) => items.iter().any(|item| item.weak_eq(tag)),
        Ok(IfNoneMatch::Any) => true,
        Err(_) => false,
    }
}

/// A read of a subscription at `version`: 304 when `If-None-Match` holds its tag, else
/// `body` — with the tag either way.
pub fn tagged_read(req: &HttpRequest, version: u32, body: impl serde::Serialize) -> HttpResponse {
    let tag = subscription_tag(version);
    if not_modified(req, &tag) {
        return HttpResponse::NotModified()
            .insert_header((header::ETAG, tag))
            .finish();
    }
    HttpResponse::Ok()
        .insert_header((header::ETAG, tag))
        .json(body)
}
