//! OAuth 2.0 client credentials (RFC 6749 §4.4): clients, their secrets and public keys,
//! the access tokens the token endpoint issues, and the rules of a token request.
//!
//! A client is a credential like an API key: bound to one customer and a fixed set of
//! scopes at issue, revocable, counted among the customer's active keys. Instead of being
//! presented itself, it authenticates at `POST /oauth/token` (with a secret, or with a JWT
//! signed by a private key whose public half posture holds: RFC 7523's `private_key_jwt`)
//! and receives an access token that lives minutes, which is presented wherever a key is.
//!
//! - A client id is `pci_` and the base32 of the client's id (the row it shares with keys)
//!   and a CRC32 of it: public, and parsed back to the row without a lookup ([`client_id`]).
//! - A client secret is `pcs_` and the base32 of 20 random bytes and their CRC32, like a
//!   key; only its SHA-256 is stored ([`ClientSecretValue`]).
//! - An access token is `pat_` and the base32 of the client's id, the token's scopes, its
//!   expiry and an HMAC-SHA256 over them with a key derived from the server's secret key
//!   ([`token`]). Nothing is stored per token; a request with one costs what a request with a
//!   key costs (its principal is cached the same way), and revoking the client ends it.
//!
//! Every value is drawn from `a-z`, `2-7` and `_`: none needs form-encoding, so a library
//! that sends a client's id and secret in Basic authentication without encoding them (some
//! do) sends what posture expects.

mod assertion;
mod public_key;
mod request;
pub mod token;

use std::fmt;

use chrono::{DateTime, Duration, Utc};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use uuid::Uuid;

pub use assertion::{ASSERTION_TYPE, AssertionClaims, AssertionError, verify_assertion};
pub use public_key::{ClientPublicKey, KeyAlgorithm, MAX_PUBLIC_KEY_PEM};
pub use request::{OAuthError, narrow_scopes};
pub use token::{AccessToken, TokenClaims, TokenKeys};

use crate::{
    KeyHash, ScopeSet,
    allow_list::AllowList,
    api_key::{BASE32_LOWER, checksummed, is_checksummed},
    error::Error,
    ids::{CustomerId, KeyId},
    rate_limit::RatePolicy,
};

const CLIENT_ID_PREFIX: &str = "pci_";
const SECRET_PREFIX: &str = "pcs_";
/// Characters of a secret (after `pcs_`) kept to tell secrets apart.
const DISPLAY_CHARS: usize = 6;

/// How long a token lives unless the operator says otherwise (`POSTURE_TOKEN_LIFETIME`).
pub const DEFAULT_TOKEN_LIFETIME: Duration = Duration::minutes(15);
/// The longest lifetime an operator may give tokens.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::minutes(60);
/// Token requests one client may make: 120 a minute (a client asks every 15 minutes; a
/// fleet of workers sharing one client asks a few times each).
pub const TOKEN_RATE: RatePolicy = RatePolicy {
    limit: 120,
    window_secs: 60,
};
/// Secrets and public keys one client may hold at once (each rotation adds one; the old
/// ones lapse at the time the rotation chose).
pub const MAX_CREDENTIALS: usize = 5;

/// The client id of the client whose row is `id`: `pci_` and the base32 of its 16 bytes and
/// their CRC32 (32 characters).
pub fn client_id(id: KeyId) -> String {
    let mut bytes = [0u8; 20];
    bytes[..16].copy_from_slice(id.as_uuid().as_bytes());
    let checksum = crc32fast::hash(&bytes[..16]);
    bytes[16..].copy_from_slice(&checksum.to_be_bytes());
    format!("{CLIENT_ID_PREFIX}{}", BASE32_LOWER.encode(&bytes))
}

/// The row of a presented client id, if it has the form and checksum of one posture issues
/// (no lookup for a made-up one).
pub fn parse_client_id(presented: &str) -> Option<KeyId> {
    let body = presented.strip_prefix(CLIENT_ID_PREFIX)?;
    if body.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 20];
    BASE32_LOWER.decode_mut(body.as_bytes(), &mut bytes).ok()?;
    let (id, checksum) = bytes.split_at(16);
    (crc32fast::hash(id).to_be_bytes() == checksum)
        .then(|| KeyId::from_uuid(Uuid::from_slice(id).expect("16 bytes")))
}

/// The display prefix of a client (`pci_` and 6 characters), as keys have theirs.
pub fn client_display_prefix(id: KeyId) -> String {
    client_id(id)[..CLIENT_ID_PREFIX.len() + DISPLAY_CHARS].to_owned()
}

/// A client secret. Shown once, when it is issued; its `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientSecretValue(String);

impl ClientSecretValue {
    /// A new secret from the operating system's CSPRNG (160 bits).
    pub fn generate() -> Result<Self, Error> {
        checksummed(SECRET_PREFIX).map(Self)
    }

    /// The hash of a presented secret of valid form (`None`: it cannot be a secret posture
    /// issued).
    pub fn hash_presented(presented: &str) -> Option<KeyHash> {
        is_checksummed(SECRET_PREFIX, presented)
            .then(|| KeyHash(Sha256::digest(presented.as_bytes()).into()))
    }

    pub fn hash(&self) -> KeyHash {
        KeyHash(Sha256::digest(self.0.as_bytes()).into())
    }

    /// `pcs_` and the first characters: enough to tell a client's secrets apart.
    pub fn display_prefix(&self) -> String {
        self.0[..SECRET_PREFIX.len() + DISPLAY_CHARS].to_owned()
    }

    /// The secret, for the one place that shows it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ClientSecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClientSecretValue({}…)", self.display_prefix())
    }
}

/// How a client proves who it is: one of these, each with its own validity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CredentialKind {
    /// A secret, by its SHA-256 (and its display prefix).
    Secret { prefix: String, hash: KeyHash },
    /// A public key (`private_key_jwt`).
    PublicKey(ClientPublicKey),
}

/// One of a client's credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCredential {
    pub id: Uuid,
    pub kind: CredentialKind,
    pub created_at: DateTime<Utc>,
    /// Set by a rotation: the credential is refused from then on.
    pub expires_at: Option<DateTime<Utc>>,
}

impl ClientCredential {
    pub fn valid_at(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }

    /// What it is, for lists: `secret pcs_abcdef` or `ES256 key <thumbprint>`.
    pub fn describe(&self) -> String {
        match &self.kind {
            CredentialKind::Secret { prefix, .. } => format!("secret {prefix}"),
            CredentialKind::PublicKey(key) => {
                format!("{} key {}", key.algorithm().as_str(), key.thumbprint())
            }
        }
    }
}

/// A credential to add to a client, and the secret to show once (for a secret).
#[derive(Clone, Debug)]
pub struct NewCredential {
    pub id: Uuid,
    pub kind: CredentialKind,
}

impl NewCredential {
    /// A new secret, returned once, here.
    pub fn secret() -> Result<(Self, ClientSecretValue), Error> {
        let secret = ClientSecretValue::generate()?;
        let credential = Self {
            id: Uuid::now_v7(),
            kind: CredentialKind::Secret {
                prefix: secret.display_prefix(),
                hash: secret.hash(),
            },
        };
        Ok((credential, secret))
    }

    /// A public key the client signs its assertions with.
    pub fn public_key(key: ClientPublicKey) -> Self {
        Self {
            id: Uuid::now_v7(),
            kind: CredentialKind::PublicKey(key),
        }
    }
}

/// A client as operators and admins see it (never a secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthClient {
    pub id: KeyId,
    pub customer_id: CustomerId,
    pub name: String,
    pub scopes: ScopeSet,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    /// Where the last recorded use came from, and the client it named (`User-Agent`).
    pub last_used_from: Option<std::net::IpAddr>,
    pub last_used_user_agent: Option<String>,
    /// Where it may be used from (empty: anywhere).
    pub allow_from: AllowList,
    pub created_by: String,
    /// Its credentials, oldest first, lapsed ones included.
    pub credentials: Vec<ClientCredential>,
}

impl OAuthClient {
    /// Its `client_id`.
    pub fn client_id(&self) -> String {
        client_id(self.id)
    }
}

/// What the token endpoint needs of a client: unrevoked, with its credentials valid now.
#[derive(Clone, Debug)]
pub struct ClientForAuth {
    pub id: KeyId,
    pub customer_id: CustomerId,
    pub scopes: ScopeSet,
    /// Where it may be used from: the token endpoint refuses a request from elsewhere.
    pub allow_from: AllowList,
    /// Why it no longer works, when it has lapsed for inactivity (the token endpoint says
    /// so once the client has proven who it is).
    pub lapsed: Option<String>,
    pub credentials: Vec<ClientCredential>,
}

impl ClientForAuth {
    /// Whether `secret` is one of the client's secrets valid at `now` (each compared in
    /// constant time, all of them compared).
    pub fn secret_matches(&self, presented: &KeyHash, now: DateTime<Utc>) -> bool {
        let mut matched = subtle::Choice::from(0);
        for credential in self.credentials.iter().filter(|c| c.valid_at(now)) {
            if let CredentialKind::Secret { hash, .. } = &credential.kind {
                matched |= hash.as_bytes().ct_eq(presented.as_bytes());
            }
        }
        matched.into()
    }

    /// The client's public keys valid at `now`.
    pub fn public_keys(&self, now: DateTime<Utc>) -> Vec<&ClientPublicKey> {
        self.credentials
            .iter()
            .filter(|c| c.valid_at(now))
            .filter_map(|c| match &c.kind {
                CredentialKind::PublicKey(key) => Some(key),
                CredentialKind::Secret { .. } => None,
            })
            .collect()
    }
}

/// What is stored when a client is issued.
#[derive(Clone, Debug)]
pub struct NewClient {
    pub id: KeyId,
    pub customer_id: CustomerId,
    pub name: String,
    pub scopes: ScopeSet,
    pub credential: NewCredential,
    /// Where it may be used from (empty, as generated: anywhere).
    pub allow_from: AllowList,
}

impl NewClient {
    /// A client of `customer` with its first credential: the public key when one is given
    /// (and no secret), else a secret, returned once, here.
    pub fn generate(
        customer_id: CustomerId,
        name: String,
        scopes: ScopeSet,
        public_key: Option<ClientPublicKey>,
    ) -> Result<(Self, Option<ClientSecretValue>), Error> {
        if scopes.is_empty() {
            return Err(Error::invalid("scope", "a client needs at least one scope"));
        }
        crate::api_key::check_name(&name)?;
        let (credential, secret) = match public_key {
            Some(key) => (NewCredential::public_key(key), None),
            None => {
                let (credential, secret) = NewCredential::secret()?;
                (credential, Some(secret))
            }
        };
        let client = Self {
            id: KeyId::generate(),
            customer_id,
            name,
            scopes,
            credential,
            allow_from: AllowList::default(),
        };
        Ok((client, secret))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_id_parses_back_to_its_row_and_a_changed_one_does_not() {
        let id = KeyId::generate();
        let text = client_id(id);
        assert_eq!(text.len(), 36);
        assert!(text.starts_with("pci_"));
        assert_eq!(parse_client_id(&text), Some(id));
        let mut changed: Vec<char> = text.chars().collect();
        changed[10] = if changed[10] == 'a' { 'b' } else { 'a' };
        assert_eq!(
            parse_client_id(&changed.into_iter().collect::<String>()),
            None
        );
        assert_eq!(parse_client_id(&text.to_uppercase()), None);
        assert_eq!(parse_client_id("pci_"), None);
        assert_eq!(client_display_prefix(id), text[..10]);
    }

    #[test]
    fn ids_and_secrets_need_no_form_encoding() {
        let id = client_id(KeyId::generate());
        let secret = ClientSecretValue::generate().unwrap();
        for text in [id.as_str(), secret.expose()] {
            assert!(
                text.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{text}"
            );
        }
    }

    #[test]
    fn a_secret_hashes_when_presented_and_its_debug_hides_it() {
        let secret = ClientSecretValue::generate().unwrap();
        assert_eq!(
            ClientSecretValue::hash_presented(secret.expose()),
            Some(secret.hash())
        );
        assert_eq!(ClientSecretValue::hash_presented("pcs_short"), None);
        // A key is not a secret, even with a valid checksum.
        let key = crate::ApiKeySecret::generate().unwrap();
        assert_eq!(ClientSecretValue::hash_presented(key.expose()), None);
        assert!(!format!("{secret:?}").contains(secret.expose()));
    }

    #[test]
    fn only_secrets_valid_now_match() {
        let now = Utc::now();
        let (old, old_secret) = NewCredential::secret().unwrap();
        let (new, new_secret) = NewCredential::secret().unwrap();
        let credential = |c: NewCredential, expires_at| ClientCredential {
            id: c.id,
            kind: c.kind,
            created_at: now,
            expires_at,
        };
        let client = ClientForAuth {
            id: KeyId::generate(),
            customer_id: CustomerId::generate(),
            scopes: ScopeSet::all(),
            allow_from: AllowList::default(),
            lapsed: None,
            credentials: vec![
                credential(old, Some(now + Duration::minutes(5))),
                credential(new, None),
            ],
        };
        assert!(client.secret_matches(&old_secret.hash(), now));
        assert!(client.secret_matches(&new_secret.hash(), now));
        let later = now + Duration::minutes(6);
        assert!(!client.secret_matches(&old_secret.hash(), later));
        assert!(client.secret_matches(&new_secret.hash(), later));
        let other = ClientSecretValue::generate().unwrap();
        assert!(!client.secret_matches(&other.hash(), now));
    }
}
