//! `Idempotency-Key` (the IETF httpapi idempotency-key draft): a POST that creates or acts,
//! retried with the same key and body within [`RETENTION_HOURS`], is answered with the first
//! answer again instead of acting twice.
//!
//! Keys are per API key: two keys of one customer never see each other's. The same key with
//! another request (another body, or another route) is refused (422), and a request with a
//! key whose first request is still running is refused (409) rather than run twice.

use sha2::{Digest, Sha256};

use crate::{Error, secrets::SealedSecret};

/// How long an answer is kept for replay.
pub const RETENTION_HOURS: i64 = 24;
/// How long a first request holds its key before a retry may run again (a request that never
/// finished: its instance stopped).
pub const IN_PROGRESS_SECS: i64 = 60;
/// How long a request that is still running keeps renewing its key's hold at most: a
/// request that hangs past it loses the key [`IN_PROGRESS_SECS`] later, and a retry runs.
pub const MAX_HELD_SECS: u64 = 600;
/// Longest key, in characters.
pub const MAX_KEY_LEN: usize = 255;

/// A client's idempotency key: 1 to [`MAX_KEY_LEN`] visible ASCII characters, sent as is or
/// as a structured-field string (`"..."`, as the draft defines the header).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The key of a header value, or why it is none.
    pub fn parse(value: &[u8]) -> Result<Self, Error> {
        let refused = || {
            Error::invalid(
                "Idempotency-Key",
                format!(
                    "must be 1 to {MAX_KEY_LEN} visible ASCII characters (optionally in \
                     double quotes)"
                ),
            )
        };
        let inner = match value {
            [b'"', inner @ .., b'"'] => inner,
            _ => value,
        };
        let visible = inner
            .iter()
            .all(|b| (0x21..=0x7e).contains(b) && *b != b'"' && *b != b'\\');
        if inner.is_empty() || inner.len() > MAX_KEY_LEN || !visible {
            return Err(refused());
        }
        // Visible ASCII is UTF-8.
        Ok(Self(String::from_utf8_lossy(inner).into_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What identifies a request for its key: a SHA-256 of its method, path and body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    pub fn of(method: &str, path: &str, body: &[u8]) -> Self {
        let mut hash = Sha256::new();
        for part in [method.as_bytes(), path.as_bytes()] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part);
        }
        hash.update(body);
        Self(hash.finalize().into())
    }
}

/// An answer kept for replay: its status, the headers that describe it, and its body sealed
/// (a created subscription's answer holds its signing secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredAnswer {
    pub status: u16,
    /// `(name, value)` of the headers replayed (content type, location, tag).
    pub headers: Vec<(String, String)>,
    pub body: SealedSecret,
}

/// One request's hold on its key (random): only the holder keeps an answer for the key or
/// frees it, so a request that outlived its hold cannot undo the retry that took it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimId(pub uuid::Uuid);

impl ClaimId {
    pub fn new() -> Self {
        Self(uuid::Uuid::new_v4())
    }
}

impl Default for ClaimId {
    fn default() -> Self {
        Self::new()
    }
}

/// What a request with a key may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The key is the request's now, under this hold: run it, then keep its answer (or
    /// release the key).
    Run(ClaimId),
    /// The same request was answered: replay this.
    Replay(StoredAnswer),
    /// The first request with this key is still running: 409.
    InProgress,
    /// The key was used for another request: 422.
    OtherRequest,
}

/// Whether an answer of `status` is kept for replay: what the request did (2xx), or a
/// refusal the same request would meet again (a malformed or unprocessable body, a missing
/// resource, a body too large or of another type). Anything else frees the key: a retry
/// runs again (a conflict, a precondition or a rate limit may pass later, a 5xx is ours).
pub fn is_kept(status: u16) -> bool {
    matches!(status, 200..=299 | 400 | 404 | 410 | 413 | 415 | 422)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_visible_ascii_quoted_or_not() {
        let key = |v: &str| IdempotencyKey::parse(v.as_bytes()).map(|k| k.0);
        assert_eq!(key("8e03978e-40d5").unwrap(), "8e03978e-40d5");
        assert_eq!(key("\"8e03978e-40d5\"").unwrap(), "8e03978e-40d5");
        assert_eq!(key(&"k".repeat(255)).unwrap().len(), 255);
        for bad in [
            "",
            "\"\"",
            "a b",
            "é",
            "a\tb",
            &"k".repeat(256),
            "\"a",
            "a\\b",
        ] {
            assert!(key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_fingerprint_tells_routes_and_bodies_apart() {
        let a = Fingerprint::of("POST", "/api/v1/webhooks", b"{}");
        assert_eq!(a, Fingerprint::of("POST", "/api/v1/webhooks", b"{}"));
        assert_ne!(a, Fingerprint::of("POST", "/api/v1/webhooks", b"{ }"));
        assert_ne!(a, Fingerprint::of("POST", "/api/v1/webhooksx", b"{}"));
        assert_ne!(
            Fingerprint::of("POST", "/a", b"b"),
            Fingerprint::of("POST", "/ab", b""),
            "lengths are hashed"
        );
    }

    #[test]
    fn only_answers_that_would_be_the_same_again_are_kept() {
        for kept in [200, 201, 202, 204, 400, 404, 410, 413, 422] {
            assert!(is_kept(kept), "{kept}");
        }
        for freed in [401, 403, 405, 408, 409, 412, 425, 428, 429, 500, 503] {
            assert!(!is_kept(freed), "{freed}");
        }
    }
}
