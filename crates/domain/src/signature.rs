//! The webhook signature: `X-Service-Signature-256: sha256=<hex>` where `<hex>` is the
//! lowercase hex HMAC-SHA256 of the exact request body bytes, keyed with the subscription's
//! signing secret — the whole `whsec_...` string, as UTF-8 bytes. This is the scheme of
//! GitHub's `X-Hub-Signature-256`, so existing verifiers work unchanged.
//!
//! Every attempt is also signed the Standard Webhooks way (<https://www.standardwebhooks.com>),
//! so its official libraries verify posture's deliveries and receivers can refuse replays:
//! `webhook-id` (the delivery's id), `webhook-timestamp` (the attempt's Unix time) and
//! `webhook-signature: v1,<base64 HMAC-SHA256>` of `{id}.{timestamp}.{body}`, keyed with the
//! 32 bytes the secret's base64 part decodes to.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The header value (`sha256=...`) for `body` signed with `secret`.
pub fn signature_header(secret: &str, body: &[u8]) -> String {
    let mut mac =
        HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(body);
    format!(
        "sha256={}",
        data_encoding::HEXLOWER.encode(&mac.finalize().into_bytes())
    )
}

/// Verifies a header against `body` in constant time (what a receiver does).
pub fn verify(secret: &str, body: &[u8], header: &str) -> bool {
    let Some(hex) = header.strip_prefix("sha256=") else {
        return false;
    };
    let Ok(expected) = data_encoding::HEXLOWER_PERMISSIVE.decode(hex.as_bytes()) else {
        return false;
    };
    let Ok(mut mac) = HmacSha256::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

/// The Standard Webhooks key of a `whsec_` secret: the bytes its base64 part decodes to.
fn standard_key(secret: &str) -> Option<Vec<u8>> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    data_encoding::BASE64.decode(encoded.as_bytes()).ok()
}

fn standard_mac(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// One `webhook-signature` entry (`v1,<base64>`) for an attempt of delivery `id` at
/// `timestamp` (Unix seconds). `None` when `secret` is not `whsec_` and base64 (posture's
/// secrets always are).
pub fn standard_signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = standard_key(secret)?;
    let mac = standard_mac(&key, id, timestamp, body);
    Some(format!(
        "v1,{}",
        data_encoding::BASE64.encode(&mac.finalize().into_bytes())
    ))
}

/// Whether any `v1` entry of a `webhook-signature` header signs the attempt (constant-time
/// comparison; what a receiver does, besides checking the timestamp is recent).
pub fn verify_standard(secret: &str, id: &str, timestamp: i64, body: &[u8], header: &str) -> bool {
    let Some(key) = standard_key(secret) else {
        return false;
    };
    header.split(' ').any(|entry| {
        let Some(encoded) = entry.strip_prefix("v1,") else {
            return false;
        };
        let Ok(given) = data_encoding::BASE64.decode(encoded.as_bytes()) else {
            return false;
        };
        standard_mac(&key, id, timestamp, body)
            .verify_slice(&given)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_webhooks_reference_vector_verifies() {
        // The reference libraries' test values (standard-webhooks, libraries/*/test).
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let body = br#"{"test": 2432232314}"#;
        let signature = standard_signature(secret, id, 1614265330, body).unwrap();
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert!(verify_standard(
            secret,
            id,
            1614265330,
            body,
            &format!("v1,bm90IGl0 {signature}")
        ));
        assert!(
            !verify_standard(secret, id, 1614265331, body, &signature),
            "another timestamp"
        );
        assert!(!verify_standard(
            secret,
            "msg_other",
            1614265330,
            body,
            &signature
        ));
        assert!(!verify_standard(secret, id, 1614265330, b"{}", &signature));
        assert!(!verify_standard(
            secret,
            id,
            1614265330,
            body,
            &signature.replace("v1,", "v2,")
        ));
    }

    #[test]
    fn githubs_published_test_vector_verifies() {
        // docs.github.com, "Validating webhook deliveries".
        assert_eq!(
            signature_header("It's a Secret to Everybody", b"Hello, World!"),
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
    }

    #[test]
    fn verification_accepts_the_signature_and_rejects_any_change() {
        let header = signature_header("whsec_abc", b"{\"a\":1}");
        assert!(verify("whsec_abc", b"{\"a\":1}", &header));
        assert!(!verify("whsec_abd", b"{\"a\":1}", &header));
        assert!(
            !verify("whsec_abc", b"{\"a\": 1}", &header),
            "re-serialised bodies do not verify"
        );
        assert!(!verify(
            "whsec_abc",
            b"{\"a\":1}",
            &header.replace("sha256=", "sha1=")
        ));
        assert!(!verify("whsec_abc", b"{\"a\":1}", ""));
    }
}
