//! Cursors: where the next page of a list starts, as an opaque, authenticated token.
//!
//! A cursor carries a sort key (and, for an order by modification, the bound its first page
//! read) and is bound to the customer, the route and the filters of the request that made
//! it: an HMAC-SHA256 over all of them, with a key derived (HKDF-SHA256) from the server's
//! secret key, so a client can neither forge a position nor carry a cursor to another list,
//! customer or filter set. The token names the key that made it; after a key rotation a
//! cursor is refused with a reason that says to start again from the first page.
//!
//! Layout (then base64url without padding): version (1 byte), key id (4 bytes), MAC (32
//! bytes), payload (JSON: the sort key and the bound).

use chrono::{DateTime, Utc};
use ring::{hkdf, hmac};
use serde::{Deserialize, Serialize};

use crate::{CustomerId, page::SortKey};

/// Longest cursor accepted, in characters (a real one is a few hundred).
pub const MAX_CURSOR_LEN: usize = 2048;

const VERSION: u8 = 1;
const KEY_ID_LEN: usize = 4;
const MAC_LEN: usize = 32;
const HEADER_LEN: usize = 1 + KEY_ID_LEN + MAC_LEN;

/// Where the next page starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    #[serde(rename = "k")]
    pub after: SortKey,
    /// The upper bound of an order by modification, fixed by the first page.
    #[serde(rename = "t", default, skip_serializing_if = "Option::is_none")]
    pub through: Option<DateTime<Utc>>,
}

/// What a cursor is bound to: the request it continues.
#[derive(Clone, Copy, Debug)]
pub struct CursorContext<'a> {
    pub customer: CustomerId,
    /// The route (its operation id).
    pub route: &'a str,
    /// The request's filters in a canonical form (everything but the page parameters).
    pub filters: &'a str,
}

/// Why a cursor is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// Not a cursor, altered, or made for another customer, route or filter set.
    #[error("cursor does not match this request")]
    Mismatch,
    /// Made with a server key that has since been rotated.
    #[error(
        "cursor was issued before a server key rotation and can no longer be read; restart \
         from the first page (without `after`)"
    )]
    Expired,
}

/// The key that signs and checks cursors.
pub struct CursorKey {
    id: [u8; KEY_ID_LEN],
    key: hmac::Key,
}

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CursorKey")
            .field("id", &data_encoding::HEXLOWER.encode(&self.id))
            .finish_non_exhaustive()
    }
}

struct HmacLen;

impl hkdf::KeyType for HmacLen {
    fn len(&self) -> usize {
        32
    }
}

/// A 32-byte key derived from the server's secret key for one purpose (HKDF-SHA256 with
/// the purpose as its label), so a derived key says nothing of the secret or of the others.
pub(crate) fn derive(secret: &[u8; 32], label: &[u8]) -> [u8; 32] {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, b"posture derived keys").extract(secret);
    let mut bytes = [0u8; 32];
    let info: &[&[u8]] = &[label];
    prk.expand(info, HmacLen)
        .and_then(|okm| okm.fill(&mut bytes))
        .expect("32 bytes is a valid HKDF-SHA256 output length");
    bytes
}

/// The key of response tags (`ETag`): an HMAC over what the tag stands for, so a tag
/// cannot be guessed, only received.
pub struct TagKey(hmac::Key);

impl std::fmt::Debug for TagKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TagKey").finish_non_exhaustive()
    }
}

impl TagKey {
    pub fn derive(secret: &[u8; 32]) -> Self {
        Self(hmac::Key::new(
            hmac::HMAC_SHA256,
            &derive(secret, b"posture etag key v1"),
        ))
    }

    /// The tag of `parts` (each length-prefixed, so no two lists of parts share a tag):
    /// 128 bits, base64url.
    pub fn tag(&self, parts: &[&[u8]]) -> String {
        let mut ctx = hmac::Context::with_key(&self.0);
        for part in parts {
            ctx.update(&(part.len() as u64).to_be_bytes());
            ctx.update(part);
        }
        data_encoding::BASE64URL_NOPAD.encode(&ctx.sign().as_ref()[..16])
    }
}

impl CursorKey {
    /// Derives the cursor key from the server's secret key.
    pub fn derive(secret: &[u8; 32]) -> Self {
        let bytes = derive(secret, b"posture cursor key v1");
        let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&digest.as_ref()[..KEY_ID_LEN]);
        Self {
            id,
            key: hmac::Key::new(hmac::HMAC_SHA256, &bytes),
        }
    }

    fn mac(&self, context: &CursorContext<'_>, payload: &[u8]) -> hmac::Tag {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(&[VERSION]);
        ctx.update(&self.id);
        ctx.update(context.customer.as_uuid().as_bytes());
        ctx.update(&(context.route.len() as u64).to_be_bytes());
        ctx.update(context.route.as_bytes());
        ctx.update(&(context.filters.len() as u64).to_be_bytes());
        ctx.update(context.filters.as_bytes());
        ctx.update(payload);
        ctx.sign()
    }

    /// The token of `cursor` for the request `context`.
    pub fn seal(&self, cursor: &Cursor, context: &CursorContext<'_>) -> String {
        let payload = serde_json::to_vec(cursor).expect("a cursor serialises");
        let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len());
        bytes.push(VERSION);
        bytes.extend_from_slice(&self.id);
        bytes.extend_from_slice(self.mac(context, &payload).as_ref());
        bytes.extend_from_slice(&payload);
        data_encoding::BASE64URL_NOPAD.encode(&bytes)
    }

    /// The cursor of `token`, if this server made it for the request `context`.
    pub fn open(&self, token: &str, context: &CursorContext<'_>) -> Result<Cursor, CursorError> {
        if token.len() > MAX_CURSOR_LEN {
            return Err(CursorError::Mismatch);
        }
        let bytes = data_encoding::BASE64URL_NOPAD
            .decode(token.as_bytes())
            .map_err(|_| CursorError::Mismatch)?;
        if bytes.len() <= HEADER_LEN || bytes[0] != VERSION {
            return Err(CursorError::Mismatch);
        }
        if bytes[1..1 + KEY_ID_LEN] != self.id {
            return Err(CursorError::Expired);
        }
        let (mac, payload) = bytes[1 + KEY_ID_LEN..].split_at(MAC_LEN);
        let expected = self.mac(context, payload);
        // Constant time: the comparison says nothing of how much of a forged MAC was right.
        if !bool::from(subtle::ConstantTimeEq::ct_eq(expected.as_ref(), mac)) {
            return Err(CursorError::Mismatch);
        }
        serde_json::from_slice(payload).map_err(|_| CursorError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::KeyPart;

    fn context<'a>(customer: CustomerId, route: &'a str, filters: &'a str) -> CursorContext<'a> {
        CursorContext {
            customer,
            route,
            filters,
        }
    }

    fn cursor() -> Cursor {
        Cursor {
            after: SortKey(vec![KeyPart::Int(2), KeyPart::Text("f-001".into())]),
            through: Some(Utc::now()),
        }
    }

    #[test]
    fn a_cursor_opens_for_the_request_that_made_it() {
        let key = CursorKey::derive(&[7; 32]);
        let customer = CustomerId::generate();
        let ctx = context(customer, "listFindings", "severity=high");
        let token = key.seal(&cursor(), &ctx);
        let opened = key.open(&token, &ctx).unwrap();
        assert_eq!(opened.after, cursor().after);
        assert!(opened.through.is_some());
        assert!(token.len() < 200, "{}", token.len());
    }

    #[test]
    fn a_cursor_of_another_customer_route_or_filter_set_does_not_match() {
        let key = CursorKey::derive(&[7; 32]);
        let customer = CustomerId::generate();
        let token = key.seal(&cursor(), &context(customer, "listFindings", "status=open"));
        for other in [
            context(CustomerId::generate(), "listFindings", "status=open"),
            context(customer, "listIdentities", "status=open"),
            context(customer, "listFindings", "status=resolved"),
            context(customer, "listFindings", ""),
        ] {
            assert_eq!(key.open(&token, &other), Err(CursorError::Mismatch));
        }
    }

    #[test]
    fn a_tampered_cursor_does_not_match() {
        let key = CursorKey::derive(&[7; 32]);
        let ctx = context(CustomerId::generate(), "listFindings", "");
        let token = key.seal(&cursor(), &ctx);
        let mut bytes = data_encoding::BASE64URL_NOPAD
            .decode(token.as_bytes())
            .unwrap();
        for i in [0, HEADER_LEN - 1, bytes.len() - 2] {
            bytes[i] ^= 1;
            let forged = data_encoding::BASE64URL_NOPAD.encode(&bytes);
            assert_eq!(
                key.open(&forged, &ctx),
                Err(CursorError::Mismatch),
                "byte {i}"
            );
            bytes[i] ^= 1;
        }
        for junk in ["", "x", "!!!", &"A".repeat(MAX_CURSOR_LEN + 1)] {
            assert_eq!(key.open(junk, &ctx), Err(CursorError::Mismatch), "{junk:?}");
        }
    }

    #[test]
    fn a_cursor_from_before_a_key_rotation_says_to_restart() {
        let ctx = context(CustomerId::generate(), "listFindings", "");
        let token = CursorKey::derive(&[7; 32]).seal(&cursor(), &ctx);
        let err = CursorKey::derive(&[8; 32]).open(&token, &ctx).unwrap_err();
        assert_eq!(err, CursorError::Expired);
        assert!(err.to_string().contains("restart from the first page"));
    }
}
