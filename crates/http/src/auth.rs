//! Authentication and authorization.
//!
//! [`presented`] reads `Authorization: Bearer <key or token>`: a key's form and checksum,
//! or an OAuth access token's MAC, are checked first (no lookup for a made-up one); the gate
//! (`gate.rs`) then has its SHA-256 looked up among unrevoked, unexpired keys (a token: its
//! client's row), through the same cache. Each route's required scope is checked by
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
use posture_domain::{
    ApiKeySecret, CustomerScope, KeyHash, KeyId, Principal, Scope,
    oauth::{TokenClaims, TokenKeys, token::is_token},
    ports::ApiKeyRepository,
};

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
pub struct Caller {
    principal: Principal,
    /// The request's client address (behind the trusted proxies, the one they forward).
    from: Option<std::net::IpAddr>,
}

impl Caller {
    /// The customer scope of the caller's data queries.
    pub fn scope(&self) -> CustomerScope {
        self.principal.scope()
    }

    /// The key the caller presented.
    pub fn key_id(&self) -> KeyId {
        self.principal.key_id()
    }

    /// Whether `principal` (the caller's credential as it stands now) may still be used
    /// from the caller's address: a waiting request or a stream re-checks it.
    pub(crate) fn still_permitted(&self, principal: &Principal) -> bool {
        principal.key_id() == self.key_id() && principal.permits(self.from)
    }
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let from = req
            .app_data::<actix_web::web::Data<crate::state::ApiState>>()
            .and_then(|state| crate::client_ip::request_client(req, &state.trusted_proxies));
        ready(
            req.extensions()
                .get::<Principal>()
                .cloned()
                .map(|principal| Caller { principal, from })
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

/// A credential a request presents: a key of valid form, or an unexpired access token
/// posture made.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Presented {
    /// The key's SHA-256.
    Key(KeyHash),
    /// What the token says (the key cache holds its principal under
    /// [`TokenClaims::principal_key`]: one entry per client and scope set).
    Token(TokenClaims),
}

impl Presented {
    /// What the key cache holds it under.
    pub(crate) fn hash(&self) -> KeyHash {
        match self {
            Presented::Key(hash) => *hash,
            Presented::Token(claims) => claims.principal_key(),
        }
    }

    /// Its principal, if it is valid now (the store's cache first).
    pub(crate) async fn authenticate(
        &self,
        keys: &dyn ApiKeyRepository,
    ) -> posture_domain::Result<Option<Principal>> {
        match self {
            Presented::Key(hash) => keys.authenticate(hash).await,
            Presented::Token(claims) => {
                keys.authenticate_token(&claims.principal_key(), claims)
                    .await
            }
        }
    }
}

/// The credential the request presents, if it has a valid form (a key's checksum, a
/// token's MAC and expiry at `now`: a made-up or expired one costs no lookup).
pub(crate) fn presented(
    headers: &HeaderMap,
    tokens: &TokenKeys,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Presented> {
    let text = bearer_token(headers)?;
    if is_token(text) {
        let claims = tokens.verify(text).filter(|c| c.expires_at > now)?;
        return Some(Presented::Token(claims));
    }
    ApiKeySecret::hash_presented(text).map(Presented::Key)
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
