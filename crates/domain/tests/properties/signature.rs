//! The webhook signature (docs/webhooks.md): `sha256=` and the lowercase hex HMAC-SHA256 of
//! the body keyed with the secret. Checked against an independent HMAC (ring's); a signature
//! verifies, and no flipped bit of body, secret or signature does.

use posture_domain::signature::{signature_header, verify};
use proptest::prelude::*;

fn flip(bytes: &mut [u8], bit: usize) {
    bytes[bit / 8] ^= 1 << (bit % 8);
}

fn secret() -> impl Strategy<Value = String> {
    prop_oneof!["whsec_[A-Za-z0-9+/]{32,43}", "[ -~]{0,80}", any::<String>()]
}

proptest! {
    #[test]
    fn the_header_is_the_hmac_sha256_of_the_body_keyed_with_the_secret(
        secret in secret(),
        body in prop::collection::vec(any::<u8>(), 0..2048),
    ) {
        let header = signature_header(&secret, &body);
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
        let expected = ring::hmac::sign(&key, &body);
        let hex: String = expected.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        prop_assert_eq!(&header, &format!("sha256={hex}"));
        prop_assert!(verify(&secret, &body, &header));
    }

    #[test]
    fn a_flipped_bit_of_the_body_fails_verification(
        secret in secret(),
        body in prop::collection::vec(any::<u8>(), 1..2048),
        bit in any::<prop::sample::Index>(),
    ) {
        let header = signature_header(&secret, &body);
        let mut changed = body.clone();
        let at = bit.index(body.len() * 8);
        flip(&mut changed, at);
        prop_assert!(!verify(&secret, &changed, &header));
    }

    #[test]
    fn a_flipped_bit_of_the_secret_fails_verification(
        secret in "[ -~]{1,80}",
        body in prop::collection::vec(any::<u8>(), 0..512),
        bit in any::<prop::sample::Index>(),
    ) {
        let header = signature_header(&secret, &body);
        let mut changed = secret.clone().into_bytes();
        // Bits 0 to 6 of an ASCII character: the secret stays text.
        let at = bit.index(changed.len() * 7);
        changed[at / 7] ^= 1 << (at % 7);
        let changed = String::from_utf8(changed).unwrap();
        prop_assert!(!verify(&changed, &body, &header));
    }

    #[test]
    fn a_flipped_bit_of_the_signature_fails_verification(
        secret in secret(),
        body in prop::collection::vec(any::<u8>(), 0..512),
        bit in any::<prop::sample::Index>(),
    ) {
        let header = signature_header(&secret, &body);
        let mut mac = data_encoding::HEXLOWER.decode(&header.as_bytes()[7..]).unwrap();
        let at = bit.index(mac.len() * 8);
        flip(&mut mac, at);
        let changed = format!("sha256={}", data_encoding::HEXLOWER.encode(&mac));
        prop_assert!(!verify(&secret, &body, &changed));
    }

    #[test]
    fn a_flipped_bit_of_the_header_text_fails_unless_it_only_changes_letter_case(
        secret in secret(),
        body in prop::collection::vec(any::<u8>(), 0..256),
        bit in any::<prop::sample::Index>(),
    ) {
        let header = signature_header(&secret, &body);
        let mut changed = header.clone().into_bytes();
        let at = bit.index(changed.len() * 7);
        changed[at / 7] ^= 1 << (at % 7);
        let changed = String::from_utf8(changed).unwrap();
        // Hex digits are case-insensitive (RFC 4648): `A` and `a` are the same signature.
        let same_value = changed.len() > 7
            && changed.starts_with("sha256=")
            && changed[7..].to_ascii_lowercase() == header[7..];
        prop_assert_eq!(verify(&secret, &body, &changed), same_value, "{}", changed);
    }
}
