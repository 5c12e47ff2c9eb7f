//! Client assertions (`private_key_jwt`, RFC 7523 §2.2 and §3; OpenID Connect Core §9): a
//! JWT the client signs with its private key, checked against the public keys posture
//! holds for it.
//!
//! The rules, each a refusal (`invalid_client`) when broken:
//! - the header's `alg` is the algorithm of one of the client's keys (`none`, HMAC and any
//!   other are refused before any key is tried: RFC 8725 §3.1); a `kid` selects among the
//!   client's own keys only, and `jku`, `x5u`, `jwk` and `x5c` are never followed (§3.10);
//!   a `typ`, when present, is `JWT` or `client-authentication+jwt` (§3.11);
//! - the signature verifies with that key;
//! - `iss` and `sub` are the client id;
//! - `aud` names the token endpoint's URL or the issuer (what OAuth libraries send);
//! - `exp` is present, not past, and at most an hour ahead (Okta's rule; what Authlib sends
//!   by default); `nbf` and `iat`, when present, are not in the future; a minute of clock
//!   skew is allowed each way;
//! - `jti` is present (1 to 256 characters); the caller refuses one it has seen before,
//!   until its `exp` ([`AssertionClaims`] says how long to remember it).

use std::collections::HashSet;

use chrono::{DateTime, Duration, TimeZone as _, Utc};
use serde::Deserialize;

use super::{ClientPublicKey, KeyAlgorithm};

/// `client_assertion_type` of a JWT assertion.
pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// Longest assertion read (a JWT signed with an 8,192-bit key is under 2 KiB).
pub const MAX_ASSERTION_LEN: usize = 8192;
/// How far ahead an assertion's `exp` may be.
const MAX_AHEAD: Duration = Duration::hours(1);
/// Clock difference allowed between the client and posture.
const SKEW: Duration = Duration::seconds(60);
const MAX_JTI_LEN: usize = 256;

/// Why an assertion is refused (said in `error_description`; all are `invalid_client`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssertionError {
    #[error("client_assertion is not a signed JWT")]
    Malformed,
    #[error("client_assertion's alg is not one of this client's keys' (RS256 or ES256)")]
    Algorithm,
    #[error("client_assertion's typ must be JWT or client-authentication+jwt")]
    Type,
    #[error("client_assertion's signature does not verify with any of this client's keys")]
    Signature,
    #[error("client_assertion's {0}")]
    Claim(&'static str),
}

/// What the caller keeps of a verified assertion: its `jti`, until its `exp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssertionClaims {
    pub jti: String,
    /// Until when the `jti` must be refused (its `exp`, plus the skew allowed).
    pub remember_until: DateTime<Utc>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct Claims {
    iss: Option<String>,
    sub: Option<String>,
    aud: Option<Audience>,
    exp: Option<f64>,
    nbf: Option<f64>,
    iat: Option<f64>,
    jti: Option<String>,
}

fn time(seconds: f64) -> Option<DateTime<Utc>> {
    (seconds.is_finite() && seconds.abs() < 1e12)
        .then(|| Utc.timestamp_opt(seconds as i64, 0).single())
        .flatten()
}

fn algorithm(alg: jsonwebtoken::Algorithm) -> Option<KeyAlgorithm> {
    match alg {
        jsonwebtoken::Algorithm::RS256 => Some(KeyAlgorithm::Rs256),
        jsonwebtoken::Algorithm::ES256 => Some(KeyAlgorithm::Es256),
        _ => None,
    }
}

/// Verifies `assertion` as client `client_id`'s, signed by one of `keys`, for one of
/// `audiences`, at `now`.
pub fn verify_assertion(
    assertion: &str,
    client_id: &str,
    keys: &[&ClientPublicKey],
    audiences: &[&str],
    now: DateTime<Utc>,
) -> Result<AssertionClaims, AssertionError> {
    if assertion.len() > MAX_ASSERTION_LEN {
        return Err(AssertionError::Malformed);
    }
    let header = jsonwebtoken::decode_header(assertion).map_err(|_| AssertionError::Malformed)?;
    let alg = algorithm(header.alg).ok_or(AssertionError::Algorithm)?;
    if let Some(typ) = &header.typ
        && !typ.eq_ignore_ascii_case("JWT")
        && !typ.eq_ignore_ascii_case("client-authentication+jwt")
    {
        return Err(AssertionError::Type);
    }
    let mut candidates: Vec<&ClientPublicKey> = keys
        .iter()
        .copied()
        .filter(|k| k.algorithm() == alg)
        .collect();
    if candidates.is_empty() {
        return Err(AssertionError::Algorithm);
    }
    // A `kid` naming one of the client's keys picks it; any other is the client's own label
    // (Authlib sends the JWK's), and every key of the algorithm is tried.
    if let Some(kid) = &header.kid
        && let Some(named) = candidates.iter().copied().find(|k| k.thumbprint() == kid)
    {
        candidates = vec![named];
    }
    let mut validation = jsonwebtoken::Validation::new(header.alg);
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.required_spec_claims = HashSet::new();
    let claims = candidates
        .iter()
        .filter_map(|key| key.decoding_key())
        .find_map(|key| {
            jsonwebtoken::decode::<serde_json::Value>(assertion, &key, &validation).ok()
        })
        .ok_or(AssertionError::Signature)?
        .claims;
    let claims: Claims = serde_json::from_value(claims).map_err(|_| {
        AssertionError::Claim("claims are not of RFC 7519's types (strings, and numbers for times)")
    })?;
    check_claims(&claims, client_id, audiences, now)
}

fn check_claims(
    claims: &Claims,
    client_id: &str,
    audiences: &[&str],
    now: DateTime<Utc>,
) -> Result<AssertionClaims, AssertionError> {
    if claims.iss.as_deref() != Some(client_id) {
        return Err(AssertionError::Claim("iss must be the client_id"));
    }
    if claims.sub.as_deref() != Some(client_id) {
        return Err(AssertionError::Claim("sub must be the client_id"));
    }
    let named = match &claims.aud {
        Some(Audience::One(aud)) => audiences.contains(&aud.as_str()),
        Some(Audience::Many(auds)) => auds.iter().any(|aud| audiences.contains(&aud.as_str())),
        None => false,
    };
    if !named {
        return Err(AssertionError::Claim(
            "aud must be the token endpoint's URL or the issuer",
        ));
    }
    let exp = claims
        .exp
        .and_then(time)
        .ok_or(AssertionError::Claim("exp is required"))?;
    if exp + SKEW <= now {
        return Err(AssertionError::Claim("exp has passed"));
    }
    if exp > now + MAX_AHEAD + SKEW {
        return Err(AssertionError::Claim("exp is more than an hour ahead"));
    }
    for (value, name) in [
        (claims.nbf, "nbf is in the future"),
        (claims.iat, "iat is in the future"),
    ] {
        if let Some(value) = value {
            let at = time(value).ok_or(AssertionError::Claim("nbf and iat must be times"))?;
            if at > now + SKEW {
                return Err(AssertionError::Claim(name));
            }
        }
    }
    let jti = claims
        .jti
        .as_deref()
        .filter(|jti| (1..=MAX_JTI_LEN).contains(&jti.len()) && !jti.chars().any(char::is_control))
        .ok_or(AssertionError::Claim(
            "jti is required: 1 to 256 characters, none a control character",
        ))?;
    Ok(AssertionClaims {
        jti: jti.to_owned(),
        remember_until: exp + SKEW,
    })
}

#[cfg(test)]
mod tests {
    use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
    use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
    use serde_json::{Value, json};

    use super::*;
    use crate::oauth::public_key::fixtures::*;

    const CLIENT: &str = "pci_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const AUD: &str = "https://posture.example.com/oauth/token";

    fn now() -> DateTime<Utc> {
        Utc.timestamp_opt(1_900_000_000, 0).unwrap()
    }

    fn claims() -> Value {
        let now = now().timestamp();
        json!({"iss": CLIENT, "sub": CLIENT, "aud": AUD, "iat": now, "exp": now + 3600,
               "jti": "b0e5a3d0-6c0b-4f3e-9d0e-2f7c1b2a4e51"})
    }

    fn sign(alg: Algorithm, pem: &str, claims: &Value) -> String {
        let key = match alg {
            Algorithm::RS256 => EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap(),
            _ => EncodingKey::from_ec_pem(pem.as_bytes()).unwrap(),
        };
        encode(&Header::new(alg), claims, &key).unwrap()
    }

    fn verify(assertion: &str) -> Result<AssertionClaims, AssertionError> {
        let rsa = ClientPublicKey::from_pem(RSA_PUBLIC).unwrap();
        let ec = ClientPublicKey::from_pem(EC_PUBLIC).unwrap();
        verify_assertion(
            assertion,
            CLIENT,
            &[&rsa, &ec],
            &[AUD, "https://posture.example.com"],
            now(),
        )
    }

    #[test]
    fn rs256_and_es256_assertions_verify() {
        for (alg, pem) in [
            (Algorithm::RS256, RSA_PRIVATE),
            (Algorithm::ES256, EC_PRIVATE),
        ] {
            let verified = verify(&sign(alg, pem, &claims())).unwrap();
            assert_eq!(verified.jti, "b0e5a3d0-6c0b-4f3e-9d0e-2f7c1b2a4e51");
            assert_eq!(verified.remember_until, now() + Duration::seconds(3660));
        }
        let mut issuer = claims();
        issuer["aud"] = json!(["https://posture.example.com"]);
        assert!(verify(&sign(Algorithm::ES256, EC_PRIVATE, &issuer)).is_ok());
    }

    /// A JWT with the given header and claims and a made-up signature.
    fn forged(header: Value, claims: &Value, signature: &[u8]) -> String {
        let part = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
        format!(
            "{}.{}.{}",
            part(&header),
            part(claims),
            URL_SAFE_NO_PAD.encode(signature)
        )
    }

    #[test]
    fn none_and_hmac_with_the_public_key_are_refused() {
        let none = forged(json!({"alg": "none"}), &claims(), b"");
        assert_eq!(verify(&none), Err(AssertionError::Malformed));
        let none = forged(json!({"alg": "none"}), &claims(), b"")
            .trim_end_matches('.')
            .to_owned()
            + ".";
        assert!(verify(&none).is_err());
        // HS256 keyed with the public key's PEM (the algorithm confusion of CVE-2015-9235).
        let hs = encode(
            &Header::new(Algorithm::HS256),
            &claims(),
            &EncodingKey::from_secret(RSA_PUBLIC.as_bytes()),
        )
        .unwrap();
        assert_eq!(verify(&hs), Err(AssertionError::Algorithm));
    }

    #[test]
    fn a_key_signs_only_with_its_own_algorithm_and_only_registered_keys_count() {
        let rsa_only = ClientPublicKey::from_pem(RSA_PUBLIC).unwrap();
        let es = sign(Algorithm::ES256, EC_PRIVATE, &claims());
        assert_eq!(
            verify_assertion(&es, CLIENT, &[&rsa_only], &[AUD], now()),
            Err(AssertionError::Algorithm)
        );
        // Signed by a key the client never registered, named by `jku`, `x5u`, `jwk`, `kid`.
        let ec = ClientPublicKey::from_pem(EC_PUBLIC).unwrap();
        let mut header = Header::new(Algorithm::RS256);
        header.jku = Some("https://attacker.example/jwks.json".into());
        header.x5u = Some("https://attacker.example/cert.pem".into());
        header.kid = Some("../../etc/passwd' OR 1=1 --".into());
        let attacker = encode(
            &header,
            &claims(),
            &EncodingKey::from_rsa_pem(RSA_PRIVATE.as_bytes()).unwrap(),
        )
        .unwrap();
        assert_eq!(
            verify_assertion(&attacker, CLIENT, &[&ec], &[AUD], now()),
            Err(AssertionError::Algorithm)
        );
        let other_ec =
            ClientPublicKey::from_stored("ES256", &json!({"x": ec.jwk()["y"], "y": ec.jwk()["x"]}))
                .unwrap();
        assert_eq!(
            verify_assertion(&es, CLIENT, &[&other_ec], &[AUD], now()),
            Err(AssertionError::Signature)
        );
    }

    #[test]
    fn a_kid_picks_the_key_it_names_and_any_other_kid_tries_them_all() {
        let ec = ClientPublicKey::from_pem(EC_PUBLIC).unwrap();
        let key = EncodingKey::from_ec_pem(EC_PRIVATE.as_bytes()).unwrap();
        for kid in [ec.thumbprint().to_owned(), "my-key-1".to_owned()] {
            let mut header = Header::new(Algorithm::ES256);
            header.kid = Some(kid);
            let assertion = encode(&header, &claims(), &key).unwrap();
            assert!(verify(&assertion).is_ok());
        }
    }

    #[test]
    fn explicit_other_types_are_refused() {
        let key = EncodingKey::from_ec_pem(EC_PRIVATE.as_bytes()).unwrap();
        for (typ, ok) in [
            ("JWT", true),
            ("client-authentication+jwt", true),
            ("at+jwt", false),
            ("dpop+jwt", false),
        ] {
            let mut header = Header::new(Algorithm::ES256);
            header.typ = Some(typ.into());
            let result = verify(&encode(&header, &claims(), &key).unwrap());
            assert_eq!(result.is_ok(), ok, "{typ}: {result:?}");
        }
    }

    #[test]
    fn each_claim_is_checked() {
        let now = now().timestamp();
        let cases: [(&str, Value, &str); 12] = [
            ("iss", json!("pci_other"), "iss"),
            ("sub", json!("pci_other"), "sub"),
            ("aud", json!("https://elsewhere.example/oauth/token"), "aud"),
            ("aud", json!(["https://elsewhere.example"]), "aud"),
            ("exp", json!(now - 61), "exp has passed"),
            ("exp", json!(now + 3600 + 61), "more than an hour"),
            ("exp", Value::Null, "exp is required"),
            ("nbf", json!(now + 120), "nbf"),
            ("iat", json!(now + 120), "iat"),
            ("jti", json!(""), "jti"),
            ("jti", json!("a\u{0}b"), "control"),
            ("iss", json!(42), "types"),
        ];
        for (claim, value, says) in cases {
            let mut claims = claims();
            if value.is_null() {
                claims.as_object_mut().unwrap().remove(claim);
            } else {
                claims[claim] = value;
            }
            let error = verify(&sign(Algorithm::ES256, EC_PRIVATE, &claims)).unwrap_err();
            assert!(error.to_string().contains(says), "{claim}: {error}");
        }
        let mut no_jti = claims();
        no_jti.as_object_mut().unwrap().remove("jti");
        assert!(verify(&sign(Algorithm::ES256, EC_PRIVATE, &no_jti)).is_err());
    }

    #[test]
    fn junk_is_malformed_and_long_input_is_not_parsed() {
        for junk in ["", "a.b.c", "not a jwt", &"a".repeat(MAX_ASSERTION_LEN + 1)] {
            assert_eq!(verify(junk), Err(AssertionError::Malformed), "{junk:.20}");
        }
    }
}
