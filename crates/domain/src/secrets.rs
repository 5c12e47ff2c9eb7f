//! Webhook signing secrets, and their encryption at rest.
//!
//! A signing secret is `whsec_` followed by the standard base64 of 32 bytes from the
//! operating system's CSPRNG. It is shown once, in the create response; the database holds
//! it sealed with AES-256-GCM (ring) under `POSTURE_SECRET_KEY`: a random 96-bit nonce per
//! secret, and the subscription's identity (customer and webhook ids) as associated data, so
//! a sealed secret cannot be moved to another row. Each sealed secret records the id of the
//! key that sealed it ([`KeyId`] of the key's SHA-256), so keys can be rotated: a
//! [`Keyring`] seals with its current key and opens with any key it holds.

use std::fmt;

use base64::Engine as _;
use ring::{
    aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey},
    rand::{SecureRandom, SystemRandom},
};
use sha2::{Digest, Sha256};

use crate::{
    console::{ClientSecret, client_secret_context},
    error::Error,
    ids::CustomerId,
};

const SECRET_PREFIX: &str = "whsec_";

/// What every signing secret looks like: `whsec_` and the standard base64 of 32 bytes (43
/// characters and one `=`). The contract states it; examples are checked against it.
pub const SECRET_PATTERN: &str = "^whsec_[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$";

/// A webhook signing secret. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret(String);

impl SigningSecret {
    /// A new secret from the operating system's CSPRNG.
    pub fn generate() -> Result<Self, Error> {
        let mut bytes = [0u8; 32];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| Error::internal("the system CSPRNG failed"))?;
        Ok(Self(format!(
            "{SECRET_PREFIX}{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        )))
    }

    /// A secret read back from storage.
    pub fn from_stored(text: String) -> Result<Self, Error> {
        if text.starts_with(SECRET_PREFIX) {
            Ok(Self(text))
        } else {
            Err(Error::internal("malformed signing secret"))
        }
    }

    /// The secret, for the create response and for signing.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret(<redacted>)")
    }
}

/// A secret as stored: the sealing key's id, the nonce and the ciphertext with its tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedSecret {
    pub key_id: String,
    pub nonce: Vec<u8>,
    pub ciphertext: Vec<u8>,
}

/// One AES-256-GCM key with its id.
struct SealingKey {
    id: String,
    key: LessSafeKey,
}

impl SealingKey {
    fn new(bytes: &[u8; 32]) -> Result<Self, Error> {
        let unbound =
            UnboundKey::new(&AES_256_GCM, bytes).map_err(|_| Error::internal("bad AES-256 key"))?;
        let digest = Sha256::digest(bytes);
        Ok(Self {
            id: data_encoding::HEXLOWER.encode(&digest[..8]),
            key: LessSafeKey::new(unbound),
        })
    }
}

/// The keys that seal and open signing secrets: the current one, and older ones that can
/// still open what they sealed (during a rotation).
pub struct Keyring {
    current: SealingKey,
    /// Signs list cursors; derived from the current key (a rotation ends old cursors).
    cursors: crate::cursor::CursorKey,
    /// Tags responses (`ETag`); derived from the current key.
    tags: crate::cursor::TagKey,
    /// Seals the console's one-time form tokens; derived from the current key.
    forms: crate::console::FormKey,
    /// Makes and checks OAuth access tokens; derived from the current key and the previous
    /// ones (a rotation ends no token early).
    tokens: crate::oauth::TokenKeys,
    previous: Vec<SealingKey>,
    random: SystemRandom,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("current", &self.current.id)
            .field(
                "previous",
                &self.previous.iter().map(|k| &k.id).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Keyring {
    pub fn new(current: &[u8; 32], previous: &[[u8; 32]]) -> Result<Self, Error> {
        Ok(Self {
            current: SealingKey::new(current)?,
            cursors: crate::cursor::CursorKey::derive(current),
            tags: crate::cursor::TagKey::derive(current),
            forms: crate::console::FormKey::derive(current),
            tokens: crate::oauth::TokenKeys::derive(current, previous),
            previous: previous
                .iter()
                .map(SealingKey::new)
                .collect::<Result<_, _>>()?,
            random: SystemRandom::new(),
        })
    }

    /// The key that signs and checks list cursors.
    pub fn cursor_key(&self) -> &crate::cursor::CursorKey {
        &self.cursors
    }

    /// The key that tags responses (`ETag`).
    pub fn tag_key(&self) -> &crate::cursor::TagKey {
        &self.tags
    }

    /// The key that seals the console's one-time form tokens.
    pub fn form_key(&self) -> &crate::console::FormKey {
        &self.forms
    }

    /// The keys of OAuth access tokens.
    pub fn token_keys(&self) -> &crate::oauth::TokenKeys {
        &self.tokens
    }

    /// The id of the key that seals new secrets.
    pub fn current_key_id(&self) -> &str {
        &self.current.id
    }

    /// Seals `secret`, bound to `context` (the row's identity).
    pub fn seal(&self, secret: &SigningSecret, context: &[u8]) -> Result<SealedSecret, Error> {
        self.seal_bytes(secret.expose().as_bytes(), context)
    }

    /// Opens a sealed secret with the key that sealed it.
    pub fn open(&self, sealed: &SealedSecret, context: &[u8]) -> Result<SigningSecret, Error> {
        SigningSecret::from_stored(self.open_text(sealed, context)?)
    }

    /// Seals a console client secret, bound to its customer.
    pub fn seal_client_secret(
        &self,
        secret: &ClientSecret,
        customer: CustomerId,
    ) -> Result<SealedSecret, Error> {
        self.seal_bytes(secret.expose().as_bytes(), &client_secret_context(customer))
    }

    /// Opens a console client secret sealed for this customer.
    pub fn open_client_secret(
        &self,
        sealed: &SealedSecret,
        customer: CustomerId,
    ) -> Result<ClientSecret, Error> {
        ClientSecret::new(self.open_text(sealed, &client_secret_context(customer))?)
            .map_err(|_| Error::internal("malformed client secret"))
    }

    /// Seals an answer kept for an idempotent replay (it may hold a signing secret), bound
    /// to `context` (its customer, key and idempotency key).
    pub fn seal_answer(&self, body: &[u8], context: &[u8]) -> Result<SealedSecret, Error> {
        self.seal_bytes(body, context)
    }

    /// Opens an answer sealed by [`Keyring::seal_answer`].
    pub fn open_answer(&self, sealed: &SealedSecret, context: &[u8]) -> Result<Vec<u8>, Error> {
        self.open_bytes(sealed, context)
    }

    fn seal_bytes(&self, plain: &[u8], context: &[u8]) -> Result<SealedSecret, Error> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .map_err(|_| Error::internal("the system CSPRNG failed"))?;
        let mut buffer = plain.to_vec();
        self.current
            .key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context),
                &mut buffer,
            )
            .map_err(|_| Error::internal("sealing a secret failed"))?;
        Ok(SealedSecret {
            key_id: self.current.id.clone(),
            nonce: nonce.to_vec(),
            ciphertext: buffer,
        })
    }

    fn open_text(&self, sealed: &SealedSecret, context: &[u8]) -> Result<String, Error> {
        String::from_utf8(self.open_bytes(sealed, context)?)
            .map_err(|_| Error::internal("malformed sealed secret"))
    }

    fn open_bytes(&self, sealed: &SealedSecret, context: &[u8]) -> Result<Vec<u8>, Error> {
        let key = std::iter::once(&self.current)
            .chain(&self.previous)
            .find(|k| k.id == sealed.key_id)
            .ok_or_else(|| {
                Error::internal(format!(
                    "no key with id {} to open a sealed secret: add it to POSTURE_SECRET_KEYS_PREVIOUS",
                    sealed.key_id
                ))
            })?;
        let nonce: [u8; NONCE_LEN] = sealed
            .nonce
            .as_slice()
            .try_into()
            .map_err(|_| Error::internal("malformed nonce"))?;
        let mut buffer = sealed.ciphertext.clone();
        let plain = key
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context),
                &mut buffer,
            )
            .map_err(|_| Error::internal("a sealed secret failed authentication"))?;
        Ok(plain.to_vec())
    }

    /// Whether `sealed` was sealed with the current key.
    pub fn is_current(&self, sealed: &SealedSecret) -> bool {
        sealed.key_id == self.current.id
    }

    /// Opens a secret sealed with any key of the ring and seals it again with the current
    /// key and a fresh nonce (a key rotation's second step).
    pub fn reseal(&self, sealed: &SealedSecret, context: &[u8]) -> Result<SealedSecret, Error> {
        self.seal_bytes(self.open_text(sealed, context)?.as_bytes(), context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_whsec_and_32_random_bytes() {
        let secret = SigningSecret::generate().unwrap();
        let body = secret.expose().strip_prefix("whsec_").unwrap();
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(body)
                .unwrap()
                .len(),
            32
        );
        assert_ne!(SigningSecret::generate().unwrap(), secret);
        assert!(!format!("{secret:?}").contains(body));
        let pattern = regex::Regex::new(SECRET_PATTERN).unwrap();
        for _ in 0..64 {
            let secret = SigningSecret::generate().unwrap();
            assert!(pattern.is_match(secret.expose()), "{}", secret.expose());
        }
    }

    #[test]
    fn a_sealed_secret_opens_to_itself_and_not_in_another_context() {
        let keyring = Keyring::new(&[1u8; 32], &[]).unwrap();
        let secret = SigningSecret::generate().unwrap();
        let sealed = keyring.seal(&secret, b"customer/webhook").unwrap();
        assert!(
            !sealed.ciphertext.windows(8).any(|w| secret
                .expose()
                .as_bytes()
                .windows(8)
                .any(|s| s == w))
        );
        assert_eq!(keyring.open(&sealed, b"customer/webhook").unwrap(), secret);
        assert!(keyring.open(&sealed, b"customer/other").is_err());
        let mut tampered = sealed.clone();
        tampered.ciphertext[0] ^= 1;
        assert!(keyring.open(&tampered, b"customer/webhook").is_err());
    }

    #[test]
    fn each_secret_gets_its_own_nonce() {
        let keyring = Keyring::new(&[1u8; 32], &[]).unwrap();
        let secret = SigningSecret::generate().unwrap();
        assert_ne!(
            keyring.seal(&secret, b"c").unwrap().nonce,
            keyring.seal(&secret, b"c").unwrap().nonce
        );
    }

    #[test]
    fn a_rotated_keyring_opens_what_the_old_key_sealed() {
        let old = Keyring::new(&[1u8; 32], &[]).unwrap();
        let secret = SigningSecret::generate().unwrap();
        let sealed = old.seal(&secret, b"c").unwrap();
        let rotated = Keyring::new(&[2u8; 32], &[[1u8; 32]]).unwrap();
        assert_ne!(rotated.current_key_id(), sealed.key_id);
        assert_eq!(rotated.open(&sealed, b"c").unwrap(), secret);
        let without_old = Keyring::new(&[2u8; 32], &[]).unwrap();
        assert!(without_old.open(&sealed, b"c").is_err());
    }

    #[test]
    fn resealing_moves_a_secret_to_the_current_key_so_the_old_one_can_go() {
        let old = Keyring::new(&[1u8; 32], &[]).unwrap();
        let secret = SigningSecret::generate().unwrap();
        let sealed = old.seal(&secret, b"c").unwrap();
        let rotated = Keyring::new(&[2u8; 32], &[[1u8; 32]]).unwrap();
        assert!(!rotated.is_current(&sealed));
        let resealed = rotated.reseal(&sealed, b"c").unwrap();
        assert!(rotated.is_current(&resealed));
        assert_ne!(resealed.nonce, sealed.nonce);
        let retired = Keyring::new(&[2u8; 32], &[]).unwrap();
        assert_eq!(retired.open(&resealed, b"c").unwrap(), secret);
        assert!(rotated.reseal(&sealed, b"other context").is_err());
    }
}
