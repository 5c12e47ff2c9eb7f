//! Conditional reads: every route declaring `Tagging::DataVersion` (the authenticated reads
//! but the export, the caller's key and the routes that tag themselves) answers a weak
//! `ETag`, and a request whose `If-None-Match` holds it gets `304 Not Modified`, which does
//! not count against the key's quota.
//!
//! The tag is computed before the route runs, without its query: an HMAC (key derived from
//! the server's secret key) over the customer's data version, the key, the path and the
//! query in a canonical form. The version changes in the same transaction as every change a
//! read route can show (a pass, a triage write, a webhook or tenant change), and with the
//! latest triage expiry passed that no change has recorded yet (a mark reads `untriaged` from
//! its expiry on); it is read before the route's own queries, so a tag never stands for
//! newer data than the body it came with. Tags cannot
//! be guessed (a key without the route's scope never receives one, so it cannot get a 304
//! in place of its 403), and one key's tags mean nothing to another key.

use actix_web::{
    dev::ServiceRequest,
    http::header::{EntityTag, Header as _, HeaderValue, IfNoneMatch},
};
use posture_domain::Principal;

use crate::{
    input::canonical_query,
    reads::Reads,
    routes::{Endpoint, Tagging},
    state::ApiState,
};

/// The tag of the response the route would give `principal` now, if the request is a read
/// that takes one (`None` also when the version cannot be read: the route then answers
/// without a tag, or with its own error).
pub(crate) async fn tag(
    req: &ServiceRequest,
    endpoint: Option<&Endpoint>,
    state: &ApiState,
    reads: &Reads,
    principal: &Principal,
) -> Option<EntityTag> {
    if endpoint.is_none_or(|e| e.tagging != Tagging::DataVersion) {
        return None;
    }
    let version = reads.versions.data_version(principal.scope()).await.ok()?;
    let query = canonical_query(req.query_string(), &[]);
    let expired_through = version
        .expired_through
        .map_or(i64::MIN, |through| through.timestamp_micros());
    let tag = state.keyring.tag_key().tag(&[
        &version.changes.to_be_bytes(),
        &expired_through.to_be_bytes(),
        principal.scope().customer_id().as_uuid().as_bytes(),
        principal.key_id().as_uuid().as_bytes(),
        req.path().as_bytes(),
        query.as_bytes(),
    ]);
    Some(EntityTag::new_weak(tag))
}

/// Whether the request's `If-None-Match` holds `tag` (weak comparison, RFC 9110 13.1.2).
/// A malformed header matches nothing, and so does `*`: the gate answers before the route
/// checks the key's scope, and only a tag the key received (with a 200, which needed the
/// scope) may stand for the route's answer.
pub(crate) fn matches(req: &ServiceRequest, tag: &EntityTag) -> bool {
    match IfNoneMatch::parse(req.request()) {
        Ok(IfNoneMatch::Items(items)) => items.iter().any(|item| item.weak_eq(tag)),
        Ok(IfNoneMatch::Any) | Err(_) => false,
    }
}

/// The `ETag` header value of `tag`.
pub(crate) fn header_value(tag: &EntityTag) -> Option<HeaderValue> {
    HeaderValue::from_str(&tag.to_string()).ok()
}
