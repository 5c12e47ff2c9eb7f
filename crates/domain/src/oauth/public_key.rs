//! Client public keys: what a client signs its assertions with (`private_key_jwt`).
//!
//! Uploaded as PEM (`-----BEGIN PUBLIC KEY-----`, what `openssl pkey -pubout` writes): an
//! RSA key of 2,048 to 8,192 bits (bound to RS256) or a P-256 key (bound to ES256). Each key
//! is bound to exactly one algorithm (RFC 8725 §3.1): an assertion whose header names
//! another is refused. Stored as a JWK of its public members; its id is its RFC 7638
//! thumbprint, which an assertion may name as `kid`.

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use rsa::{pkcs8::DecodePublicKey as _, traits::PublicKeyParts as _};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::Error;

/// Longest PEM accepted (an 8,192-bit RSA key is about 1,500 characters).
pub const MAX_PUBLIC_KEY_PEM: usize = 4096;

string_enum! {
    /// The one algorithm a key signs with.
    pub enum KeyAlgorithm ("algorithm") {
        /// RSASSA-PKCS1-v1_5 with SHA-256.
        Rs256 = "RS256",
        /// ECDSA on P-256 with SHA-256.
        Es256 = "ES256",
    }
}

/// A client's public key, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientPublicKey {
    algorithm: KeyAlgorithm,
    /// The JWK's public members (RSA: `n`, `e`; EC: `crv`, `x`, `y`), base64url.
    jwk: Value,
    thumbprint: String,
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::invalid("publicKey", reason)
}

impl ClientPublicKey {
    /// Reads a PEM public key (SubjectPublicKeyInfo).
    pub fn from_pem(pem: &str) -> Result<Self, Error> {
        if pem.len() > MAX_PUBLIC_KEY_PEM {
            return Err(invalid(format!(
                "a public key's PEM is at most {MAX_PUBLIC_KEY_PEM} characters"
            )));
        }
        let pem = pem.trim();
        if let Ok(key) = rsa::RsaPublicKey::from_public_key_pem(pem) {
            let bits = key.size() * 8;
            if !(2048..=8192).contains(&bits) {
                return Err(invalid(format!(
                    "an RSA key must have 2048 to 8192 bits; this one has {bits}"
                )));
            }
            return Ok(Self::rsa(&key.n().to_bytes_be(), &key.e().to_bytes_be()));
        }
        let p256 = <p256::PublicKey as p256::pkcs8::DecodePublicKey>::from_public_key_pem(pem)
            .map_err(|_| {
                invalid(
                    "not a PEM public key posture accepts: an RSA key (RS256) or a P-256 key \
                 (ES256), as `-----BEGIN PUBLIC KEY-----`",
                )
            })?;
        // Uncompressed (P-256's default): 0x04, then x and y, 32 bytes each.
        let point = p256.to_sec1_bytes();
        match (point.len(), point.first()) {
            (65, Some(4)) => Ok(Self::ec(&point[1..33], &point[33..])),
            _ => Err(invalid("the P-256 key's point is not uncompressed")),
        }
    }

    fn rsa(n: &[u8], e: &[u8]) -> Self {
        let (n, e) = (URL_SAFE_NO_PAD.encode(n), URL_SAFE_NO_PAD.encode(e));
        // RFC 7638 §3.2: the required members, in lexicographic order, no whitespace.
        let canonical = format!(r#"{{"e":"{e}","kty":"RSA","n":"{n}"}}"#);
        Self {
            algorithm: KeyAlgorithm::Rs256,
            thumbprint: URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes())),
            jwk: json!({"kty": "RSA", "n": n, "e": e}),
        }
    }

    fn ec(x: &[u8], y: &[u8]) -> Self {
        let (x, y) = (URL_SAFE_NO_PAD.encode(x), URL_SAFE_NO_PAD.encode(y));
        let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        Self {
            algorithm: KeyAlgorithm::Es256,
            thumbprint: URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes())),
            jwk: json!({"kty": "EC", "crv": "P-256", "x": x, "y": y}),
        }
    }

    /// A key read back from storage: its algorithm and JWK.
    pub fn from_stored(algorithm: &str, jwk: &Value) -> Result<Self, Error> {
        let text = |name: &str| {
            jwk[name]
                .as_str()
                .and_then(|v| URL_SAFE_NO_PAD.decode(v).ok())
                .ok_or_else(|| Error::internal("malformed stored public key"))
        };
        match algorithm.parse::<KeyAlgorithm>() {
            Ok(KeyAlgorithm::Rs256) => Ok(Self::rsa(&text("n")?, &text("e")?)),
            Ok(KeyAlgorithm::Es256) => Ok(Self::ec(&text("x")?, &text("y")?)),
            Err(_) => Err(Error::internal("unknown stored key algorithm")),
        }
    }

    pub fn algorithm(&self) -> KeyAlgorithm {
        self.algorithm
    }

    /// The JWK's public members.
    pub fn jwk(&self) -> &Value {
        &self.jwk
    }

    /// Its RFC 7638 thumbprint (SHA-256, base64url): the `kid` it answers to.
    pub fn thumbprint(&self) -> &str {
        &self.thumbprint
    }

    /// The key in the form the JWT verifier takes.
    pub(super) fn decoding_key(&self) -> Option<jsonwebtoken::DecodingKey> {
        let member = |name: &str| self.jwk[name].as_str();
        match self.algorithm {
            KeyAlgorithm::Rs256 => {
                jsonwebtoken::DecodingKey::from_rsa_components(member("n")?, member("e")?).ok()
            }
            KeyAlgorithm::Es256 => {
                jsonwebtoken::DecodingKey::from_ec_components(member("x")?, member("y")?).ok()
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Keys for tests, made with `openssl genpkey` (never used anywhere else).

    pub const RSA_PRIVATE: &str = include_str!("fixtures/rsa-private.pem");
    pub const RSA_PUBLIC: &str = include_str!("fixtures/rsa-public.pem");
    pub const EC_PRIVATE: &str = include_str!("fixtures/ec-private.pem");
    pub const EC_PUBLIC: &str = include_str!("fixtures/ec-public.pem");
    pub const RSA_1024_PUBLIC: &str = include_str!("fixtures/rsa-1024-public.pem");
    pub const P384_PUBLIC: &str = include_str!("fixtures/p384-public.pem");
}

#[cfg(test)]
mod tests {
    use super::{fixtures::*, *};

    #[test]
    fn rsa_and_p256_keys_are_read_and_bound_to_one_algorithm() {
        let rsa = ClientPublicKey::from_pem(RSA_PUBLIC).unwrap();
        assert_eq!(rsa.algorithm(), KeyAlgorithm::Rs256);
        assert_eq!(rsa.jwk()["kty"], "RSA");
        let ec = ClientPublicKey::from_pem(EC_PUBLIC).unwrap();
        assert_eq!(ec.algorithm(), KeyAlgorithm::Es256);
        assert_eq!(ec.jwk()["crv"], "P-256");
        assert_eq!(ec.thumbprint().len(), 43);
        assert_ne!(ec.thumbprint(), rsa.thumbprint());
    }

    #[test]
    fn a_stored_key_reads_back_the_same() {
        for pem in [RSA_PUBLIC, EC_PUBLIC] {
            let key = ClientPublicKey::from_pem(pem).unwrap();
            let stored = ClientPublicKey::from_stored(key.algorithm().as_str(), key.jwk());
            assert_eq!(stored.unwrap(), key);
        }
    }

    #[test]
    fn weak_keys_other_curves_private_keys_and_junk_are_refused() {
        for (pem, says) in [
            (RSA_1024_PUBLIC, "2048 to 8192 bits"),
            (P384_PUBLIC, "P-256"),
            (RSA_PRIVATE, "PEM public key"),
            (EC_PRIVATE, "PEM public key"),
            ("hello", "PEM public key"),
        ] {
            let error = ClientPublicKey::from_pem(pem).unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
        }
        let long = "A".repeat(MAX_PUBLIC_KEY_PEM + 1);
        assert!(ClientPublicKey::from_pem(&long).is_err());
    }

    /// The thumbprint of RFC 7638 §3.1's example key is the one the RFC gives.
    #[test]
    fn the_thumbprint_is_rfc_7638s() {
        let n = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";
        let key = ClientPublicKey::from_stored("RS256", &json!({"n": n, "e": "AQAB"})).unwrap();
        assert_eq!(
            key.thumbprint(),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
    }
}
