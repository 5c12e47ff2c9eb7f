//! What the CLI shows the service: an API key, or an OAuth client with its secret or the
//! private key that signs its assertions (`private_key_jwt`: RS256 for an RSA key, ES256 for
//! a P-256 one, a five-minute `exp`, a random `jti`, the token endpoint's URL as `aud`).

use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header};

/// How long an assertion the CLI signs is valid.
const ASSERTION_LIFETIME: Duration = Duration::from_secs(300);

/// What the CLI shows the service.
#[derive(Clone)]
pub enum Credential {
    /// An API key, sent as it is.
    Key(String),
    /// An OAuth client: its tokens are fetched with this.
    Client { id: String, proof: Proof },
}

/// How an OAuth client proves itself at the token endpoint.
#[derive(Clone)]
pub enum Proof {
    /// `client_secret_basic`.
    Secret(String),
    /// `private_key_jwt`, signed with this key (read from `POSTURE_CLIENT_KEY_FILE`).
    PrivateKey(SigningKey),
}

/// A private key that signs assertions, with its algorithm.
#[derive(Clone)]
pub struct SigningKey {
    key: EncodingKey,
    alg: Algorithm,
}

impl SigningKey {
    /// A PKCS#8 PEM private key: P-256 (ES256) or RSA (RS256).
    pub fn from_pem(pem: &str) -> Result<Self, String> {
        if let Ok(key) = EncodingKey::from_ec_pem(pem.as_bytes()) {
            return Ok(Self {
                key,
                alg: Algorithm::ES256,
            });
        }
        EncodingKey::from_rsa_pem(pem.as_bytes())
            .map(|key| Self {
                key,
                alg: Algorithm::RS256,
            })
            .map_err(|_| {
                "not a PEM private key of P-256 or RSA (PKCS#8, `-----BEGIN PRIVATE KEY-----`; \
                 `openssl pkcs8 -topk8 -nocrypt -in old.key -out client.key` converts one)"
                    .to_owned()
            })
    }

    /// An assertion of `client_id` for `audience` (the token endpoint's URL).
    pub(crate) fn sign(&self, client_id: &str, audience: &str) -> Result<String, String> {
        let now = chrono::Utc::now().timestamp();
        let claims = serde_json::json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + ASSERTION_LIFETIME.as_secs() as i64,
            "jti": uuid::Uuid::new_v4().to_string(),
        });
        jsonwebtoken::encode(&Header::new(self.alg), &claims, &self.key)
            .map_err(|e| format!("signing the client assertion: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_both_kinds_are_read_and_others_refused_with_how_to_convert() {
        let ec = include_str!("../../domain/src/oauth/fixtures/ec-private.pem");
        let rsa = include_str!("../../domain/src/oauth/fixtures/rsa-private.pem");
        assert_eq!(SigningKey::from_pem(ec).unwrap().alg, Algorithm::ES256);
        assert_eq!(SigningKey::from_pem(rsa).unwrap().alg, Algorithm::RS256);
        let public = include_str!("../../domain/src/oauth/fixtures/ec-public.pem");
        for junk in [public, "hello"] {
            let error = SigningKey::from_pem(junk).err().unwrap();
            assert!(error.contains("openssl pkcs8"), "{error}");
        }
    }
}
