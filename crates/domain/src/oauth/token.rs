//! Access tokens: what `POST /oauth/token` issues and `/api/v1` and `/scim/v2` accept in
//! place of a key.
//!
//! `pat_` and the base32 of: a version byte, the client's id (16 bytes), the token's scopes
//! (a byte, a bit per scope), its expiry (seconds since the epoch, 8 bytes), then the first
//! 16 bytes of an HMAC-SHA256 over all of that, with a key derived (HKDF-SHA256) from the
//! server's secret key (`POSTURE_SECRET_KEY`). Verifying one costs an HMAC and no query; the
//! gate then finds the client's principal as it finds a key's (cached, revocations heard on
//! LISTEN), so a revoked client's tokens stop working as its key would. Keys that are being
//! rotated out (`POSTURE_SECRET_KEYS_PREVIOUS`) still verify the tokens they made, so a
//! rotation ends no token early.
//!
//! Tokens are opaque to clients: the layout may change with the version byte.

use std::fmt;

use chrono::{DateTime, TimeZone as _, Utc};
use ring::hmac;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::{KeyHash, KeyId, ScopeSet, api_key::BASE32_LOWER};

const PREFIX: &str = "pat_";
const VERSION: u8 = 1;
const PAYLOAD_LEN: usize = 1 + 16 + 1 + 8;
const MAC_LEN: usize = 16;
const BYTES: usize = PAYLOAD_LEN + MAC_LEN;
/// `pat_` and the base32 of 42 bytes (68 characters, no padding).
const TOKEN_LEN: usize = PREFIX.len() + 68;

/// The keys tokens are made and checked with: the current one first.
pub struct TokenKeys(Vec<hmac::Key>);

impl fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TokenKeys").field(&self.0.len()).finish()
    }
}

impl TokenKeys {
    /// Derived from the server's secret key and the keys being rotated out.
    pub fn derive(current: &[u8; 32], previous: &[[u8; 32]]) -> Self {
        let key = |secret: &[u8; 32]| {
            hmac::Key::new(
                hmac::HMAC_SHA256,
                &crate::cursor::derive(secret, b"posture access token key v1"),
            )
        };
        Self(std::iter::once(current).chain(previous).map(key).collect())
    }

    /// A token for `claims`.
    pub fn issue(&self, claims: &TokenClaims) -> AccessToken {
        let payload = claims.payload();
        let mac = hmac::sign(&self.0[0], &payload);
        let mut bytes = [0u8; BYTES];
        bytes[..PAYLOAD_LEN].copy_from_slice(&payload);
        bytes[PAYLOAD_LEN..].copy_from_slice(&mac.as_ref()[..MAC_LEN]);
        AccessToken(format!("{PREFIX}{}", BASE32_LOWER.encode(&bytes)))
    }

    /// What a presented token says, if posture made it with one of these keys (expired or
    /// not: the caller compares the expiry with its clock). `None` for anything else.
    pub fn verify(&self, presented: &str) -> Option<TokenClaims> {
        let body = presented.strip_prefix(PREFIX)?;
        if presented.len() != TOKEN_LEN {
            return None;
        }
        let mut bytes = [0u8; BYTES];
        let fits = BASE32_LOWER
            .decode_len(body.len())
            .is_ok_and(|len| len == BYTES);
        if !fits
            || BASE32_LOWER
                .decode_mut(body.as_bytes(), &mut bytes)
                .is_err()
        {
            return None;
        }
        let (payload, mac) = bytes.split_at(PAYLOAD_LEN);
        // `verify` compares in constant time; the truncated tag is checked by recomputing.
        let authentic = self.0.iter().any(|key| {
            let expected = hmac::sign(key, payload);
            subtle::ConstantTimeEq::ct_eq(&expected.as_ref()[..MAC_LEN], mac).into()
        });
        if !authentic || payload[0] != VERSION {
            return None;
        }
        let client = Uuid::from_slice(&payload[1..17]).ok()?;
        let seconds = i64::from_be_bytes(payload[18..26].try_into().ok()?);
        Some(TokenClaims {
            client: KeyId::from_uuid(client),
            scopes: ScopeSet::from_bits(payload[17]),
            expires_at: Utc.timestamp_opt(seconds, 0).single()?,
        })
    }
}

/// Whether `presented` looks like an access token (its prefix): the gate asks the token
/// keys, not the key store.
pub fn is_token(presented: &str) -> bool {
    presented.starts_with(PREFIX)
}

/// What a token stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenClaims {
    pub client: KeyId,
    /// The scopes it was issued with (used with the client's own, whichever are fewer).
    pub scopes: ScopeSet,
    /// To the second.
    pub expires_at: DateTime<Utc>,
}

impl TokenClaims {
    /// What the key cache holds the token's principal under: one entry for every token of
    /// a client with the same scopes (SHA-256 of the client and the scopes, apart from any
    /// key's hash), so asking for many tokens cannot fill the cache. The token's own expiry
    /// is checked from its claims, before the cache is asked.
    pub fn principal_key(&self) -> KeyHash {
        let mut digest = Sha256::new();
        digest.update(b"posture access token principal v1");
        digest.update(self.client.as_uuid().as_bytes());
        digest.update([self.scopes.bits()]);
        KeyHash(digest.finalize().into())
    }

    fn payload(&self) -> [u8; PAYLOAD_LEN] {
        let mut payload = [0u8; PAYLOAD_LEN];
        payload[0] = VERSION;
        payload[1..17].copy_from_slice(self.client.as_uuid().as_bytes());
        payload[17] = self.scopes.bits();
        payload[18..26].copy_from_slice(&self.expires_at.timestamp().to_be_bytes());
        payload
    }
}

/// An issued token. Its `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(String);

impl AccessToken {
    /// The token, for the one response that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scope;

    fn claims() -> TokenClaims {
        TokenClaims {
            client: KeyId::generate(),
            scopes: [Scope::ReadFindings, Scope::ProvisionScim]
                .into_iter()
                .collect(),
            expires_at: Utc.timestamp_opt(1_900_000_000, 0).unwrap(),
        }
    }

    #[test]
    fn a_token_verifies_to_its_claims_and_a_changed_one_not_at_all() {
        let keys = TokenKeys::derive(&[7; 32], &[]);
        let claims = claims();
        let token = keys.issue(&claims);
        assert_eq!(token.expose().len(), TOKEN_LEN);
        assert!(is_token(token.expose()));
        assert_eq!(keys.verify(token.expose()), Some(claims));
        let text = token.expose();
        for i in [4, 20, 40, TOKEN_LEN - 1] {
            let mut changed: Vec<char> = text.chars().collect();
            changed[i] = if changed[i] == 'a' { 'b' } else { 'a' };
            let changed: String = changed.into_iter().collect();
            assert_eq!(keys.verify(&changed), None, "position {i}");
        }
        assert_eq!(keys.verify(&text[..TOKEN_LEN - 1]), None);
        assert_eq!(keys.verify("pat_"), None);
    }

    #[test]
    fn another_servers_key_does_not_verify_a_token_but_a_rotated_out_one_does() {
        let old = TokenKeys::derive(&[1; 32], &[]);
        let token = old.issue(&claims());
        assert_eq!(
            TokenKeys::derive(&[2; 32], &[]).verify(token.expose()),
            None
        );
        let rotated = TokenKeys::derive(&[2; 32], &[[1; 32]]);
        assert_eq!(
            rotated.verify(token.expose()),
            Some(old.verify(token.expose()).unwrap())
        );
        // New tokens are made with the current key.
        let new = rotated.issue(&claims());
        assert_eq!(old.verify(new.expose()), None);
    }

    #[test]
    fn every_token_of_a_client_with_the_same_scopes_has_one_principal_key() {
        let keys = TokenKeys::derive(&[7; 32], &[]);
        let claims = claims();
        let later = TokenClaims {
            expires_at: claims.expires_at + chrono::Duration::minutes(5),
            ..claims
        };
        assert_ne!(keys.issue(&claims).expose(), keys.issue(&later).expose());
        assert_eq!(claims.principal_key(), later.principal_key());
        let narrower = TokenClaims {
            scopes: [Scope::ReadFindings].into_iter().collect(),
            ..claims
        };
        assert_ne!(claims.principal_key(), narrower.principal_key());
        let other = TokenClaims {
            client: KeyId::generate(),
            ..claims
        };
        assert_ne!(claims.principal_key(), other.principal_key());
    }

    #[test]
    fn debug_shows_neither_a_token_nor_a_key() {
        let keys = TokenKeys::derive(&[7; 32], &[]);
        let token = keys.issue(&claims());
        assert!(!format!("{token:?}").contains(&token.expose()[4..]));
        assert!(!format!("{keys:?}").contains("7"));
    }
}
