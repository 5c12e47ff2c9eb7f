//! Strong entity tags of webhook subscriptions and findings, and the preconditions on them:
//! `If-Match` guards a change against a concurrent one (412 when the resource changed since
//! the caller read its tag), `If-None-Match` answers a read that is current with 304.
//!
//! A subscription's tag is `"v<version>"`: its version counts the changes a consumer can see
//! (a trigger bumps it), so the tag is strong — equal tags, equal representations. A
//! finding's is made of the times of everything that changes its representation
//! (`Finding::tag`).

use actix_web::{
    HttpRequest, HttpResponse,
    http::header::{self, EntityTag, Header as _, IfMatch, IfNoneMatch},
};

use posture_domain::Refusal;

use crate::{answer::Reply, error::ApiError};

/// The tag of a subscription at `version`.
pub fn subscription_tag(version: u32) -> EntityTag {
    EntityTag::new_strong(format!("v{version}"))
}

/// `If-Match` as posture reads it: `*`, or a comma-separated list of entity tags (weak or
/// strong, RFC 9110); empty states no precondition. An opaque tag may hold a comma by RFC
/// 9110, but posture's tags never do and the list is split at every comma, so the pattern
/// leaves the comma out of a tag: whatever it allows, [`if_match`] reads (a
/// property test); `W/",x"` is a 400.
pub(crate) const IF_MATCH_PATTERN: &str = "^(|\\*|(W/)?\"[\\x21\\x23-\\x2b\\x2d-\\x7e]*\"([ \\t]*,[ \\t]*(W/)?\"[\\x21\\x23-\\x2b\\x2d-\\x7e]*\")*)$";

/// The versions the request's `If-Match` accepts: `None` without the header (or an empty
/// one) or with `*` (any current subscription). Weak tags never match (strong comparison, RFC 9110 13.1.1),
/// nor do tags posture did not make: with only those, no version is accepted (412).
pub fn if_match(req: &HttpRequest) -> Result<Option<Vec<u32>>, ApiError> {
    Ok(if_match_tags(req)?.map(|tags| {
        tags.iter()
            .filter_map(|tag| tag.strip_prefix('v')?.parse().ok())
            .collect()
    }))
}

/// The strong tags the request's `If-Match` accepts, as given: `None` without the header
/// (or an empty one) or with `*`. Weak tags never match (strong comparison).
pub fn if_match_tags(req: &HttpRequest) -> Result<Option<Vec<String>>, ApiError> {
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
                .map(|tag| tag.tag().to_owned())
                .collect(),
        )),
        Ok(IfMatch::Items(_)) | Err(_) => Err(ApiError::invalid(
            Refusal::Malformed,
            "If-Match",
            "If-Match: must be * or entity tags such as \"v3\" (the resource's ETag, quoted)",
        )),
    }
}

/// A read tagged `tag`: 304 when `If-None-Match` holds it, else `body` — with the tag
/// either way.
pub fn tagged<T: serde::Serialize>(req: &HttpRequest, tag: EntityTag, body: T) -> Reply<T> {
    if not_modified(req, &tag) {
        return Reply::not_modified(
            HttpResponse::NotModified()
                .insert_header((header::ETAG, tag))
                .finish(),
        );
    }
    Reply::new(&body).header((header::ETAG, tag))
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
pub fn tagged_read<T: serde::Serialize>(req: &HttpRequest, version: u32, body: T) -> Reply<T> {
    tagged(req, subscription_tag(version), body)
}
