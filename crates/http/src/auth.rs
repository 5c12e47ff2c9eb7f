//! Authentication and authorization.
//!
//! [`presented_key`] reads `Authorization: Bearer <key>`: the key's form and checksum are
//! checked first (no lookup for a made-up key); the gate (`gate.rs`) then has its SHA-256
//! looked up among unrevoked, unexpired keys. Each route's required scope is checked by
//! `routes::serve` ([`authorize`]) for the route the router will dispatch to (found on the
//! percent-decoded path the router matches), which only then puts the [`Principal`] into the
//! request's extensions: a route cannot be declared without its access rule, and a handler
//! reached any other way has no caller. Handlers get the caller through [`Caller`], which
//! exists only after both.

use std::future::{Ready, ready};

use actix_web::{
    FromRequest, HttpMessage, HttpRequest,
    dev::Payload,
    http::header::{AUTHORIZATION, HeaderMap},
};
use posture_domain::{ApiKeySecret, CustomerScope, KeyHash, KeyId, Principal, Scope};

use crate::error::ApiError;

/// Who may call a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone, without a key (the contract itself).
    Public,
    /// Any valid key, whatever its scopes (the key describing itself).
    AnyKey,
    /// A valid key holding this scope.
    Scope(Scope),
    /// A valid key holding every one of these scopes (a route that needs what two scopes
    /// grant: resending past findings' bodies is managing a webhook and reading findings).
    AllOf(&'static [Scope]),
}

impl Access {
    /// The scopes it requires (none for a public route or one open to any key).
    pub fn scopes(&self) -> &[Scope] {
        match self {
            Access::Scope(scope) => std::slice::from_ref(scope),
            Access::AllOf(scopes) => scopes,
            Access::Public | Access::AnyKey => &[],
        }
    }
}

/// The authenticated caller of a request.
#[derive(Clone)]
pub struct Caller(Principal);

impl Caller {
    /// The customer scope of the caller's data queries.
    pub fn scope(&self) -> CustomerScope {
        self.0.scope()
    }

    /// The key the caller presented.
    pub fn key_id(&self) -> KeyId {
        self.0.key_id()
    }
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            req.extensions()
                .get::<Principal>()
                .cloned()
                .map(Caller)
                .ok_or(ApiError::Unauthorized),
        )
    }
}

/// The presented key, if the header has the form `Bearer <token>`.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The hash of the presented key, if the request presents one of a valid form (checksum
/// included: a made-up key costs no lookup).
pub(crate) fn presented_key(headers: &HeaderMap) -> Option<KeyHash> {
    bearer_token(headers).and_then(ApiKeySecret::hash_presented)
}

/// The route's scope check (run by `routes::serve`, after the gate): the caller
/// must hold every scope of `access`; the first one missing is named.
pub(crate) fn authorize(principal: Option<&Principal>, access: Access) -> Result<(), ApiError> {
    if access == Access::Public {
        return Ok(());
    }
    let principal = principal.ok_or(ApiError::Unauthorized)?;
    match access
        .scopes()
        .iter()
        .find(|scope| !principal.has_scope(**scope))
    {
        Some(missing) => Err(ApiError::InsufficientScope(*missing)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::HeaderValue;

    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_token(&headers("Bearer svc_x")), Some("svc_x"));
        assert_eq!(bearer_token(&headers("bearer svc_x")), Some("svc_x"));
    }

    #[test]
    fn other_schemes_carry_no_key() {
        assert_eq!(bearer_token(&headers("Basic dXNlcjpwdw==")), None);
        assert_eq!(bearer_token(&headers("svc_x")), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }
}
