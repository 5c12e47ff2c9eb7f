//! The rules of a token request that need no client: the errors RFC 6749 §5.2 names, and
//! the scope a token is granted.

use crate::{Scope, ScopeSet};

/// A token request refused, with the code RFC 6749 §5.2 gives it and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// Missing or repeated parameter, more than one way of authenticating, a body that is
    /// not a form.
    #[error("{0}")]
    InvalidRequest(String),
    /// The client is unknown or revoked, or its credential does not match.
    #[error("{0}")]
    InvalidClient(String),
    #[error("grant_type must be client_credentials")]
    UnsupportedGrantType,
    /// A scope posture does not know or the client does not hold.
    #[error("{0}")]
    InvalidScope(String),
    /// The client may not use this grant from here: its allow-list does not name the
    /// request's address.
    #[error(
        "this client may not be used from this address: an admin of its customer sets where it may be used from"
    )]
    UnauthorizedClient,
}

impl OAuthError {
    /// The `error` code.
    pub fn code(&self) -> &'static str {
        match self {
            OAuthError::InvalidRequest(_) => "invalid_request",
            OAuthError::InvalidClient(_) => "invalid_client",
            OAuthError::UnsupportedGrantType => "unsupported_grant_type",
            OAuthError::InvalidScope(_) => "invalid_scope",
            OAuthError::UnauthorizedClient => "unauthorized_client",
        }
    }
}

/// The scopes a token gets: those the request's `scope` names (space-separated, RFC 6749
/// §3.3), each of which the client must hold; all of the client's without a `scope`.
pub fn narrow_scopes(requested: Option<&str>, client: ScopeSet) -> Result<ScopeSet, OAuthError> {
    let Some(requested) = requested.filter(|text| !text.trim().is_empty()) else {
        return Ok(client);
    };
    let mut granted = ScopeSet::default();
    for name in requested.split(' ').filter(|name| !name.is_empty()) {
        let scope: Scope = name.parse().map_err(|_| {
            OAuthError::InvalidScope(format!(
                "unknown scope {}; posture's scopes are: {}",
                crate::outside::excerpt(name, 64),
                ScopeSet::all().to_oauth()
            ))
        })?;
        if !client.contains(scope) {
            return Err(OAuthError::InvalidScope(format!(
                "this client does not hold {scope}; it holds: {}",
                client.to_oauth()
            )));
        }
        granted.insert(scope);
    }
    Ok(granted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(scopes: &[Scope]) -> ScopeSet {
        scopes.iter().copied().collect()
    }

    #[test]
    fn no_scope_grants_the_clients_and_a_scope_narrows_it() {
        let client = set(&[Scope::ReadFindings, Scope::ReadIdentities]);
        assert_eq!(narrow_scopes(None, client), Ok(client));
        assert_eq!(narrow_scopes(Some("  "), client), Ok(client));
        assert_eq!(
            narrow_scopes(Some("read:findings"), client),
            Ok(set(&[Scope::ReadFindings]))
        );
        assert_eq!(
            narrow_scopes(Some("read:identities  read:findings"), client),
            Ok(client)
        );
    }

    #[test]
    fn a_scope_the_client_lacks_or_posture_does_not_know_is_invalid() {
        let client = set(&[Scope::ReadFindings]);
        for asked in [
            "manage:webhooks",
            "read:findings write:findings",
            "admin",
            "READ:FINDINGS",
        ] {
            let error = narrow_scopes(Some(asked), client).unwrap_err();
            assert_eq!(error.code(), "invalid_scope", "{asked}");
        }
    }
}
