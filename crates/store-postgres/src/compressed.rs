//! Large values kept for a while (the findings a chunk of deliveries shares, an idempotent
//! request's kept answer) are stored compressed with zstd: JSON of findings shrinks several
//! times, and a text repeated in every finding of a chunk (a bulk triage's comment) is kept
//! about once. What is read back is bounded: a stored value that would unpack beyond
//! [`MAX_UNPACKED`] is refused as corrupt, never allocated.

use posture_domain::Error;

/// zstd's level: its default, fast to write (the values are written once, on a request's
/// or an attempt's path) and a good share of the gain of higher levels on JSON.
const LEVEL: i32 = 3;
/// The most a stored value unpacks to: far above what posture stores (a chunk of 100
/// findings, a bulk triage's answer of 500), far below what would hurt.
pub(crate) const MAX_UNPACKED: usize = 64 << 20;

/// `bytes` compressed.
pub(crate) fn pack(bytes: &[u8]) -> Result<Vec<u8>, Error> {
    zstd::bulk::compress(bytes, LEVEL).map_err(|e| Error::internal(format!("compressing: {e}")))
}

/// What [`pack`] stored, unpacked (`what` names it in the error).
pub(crate) fn unpack(stored: &[u8], what: &str) -> Result<Vec<u8>, Error> {
    zstd::bulk::decompress(stored, MAX_UNPACKED).map_err(|e| crate::error::corrupt(what, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_comes_back_as_it_was_and_repeats_are_kept_about_once() {
        // 2,000 characters of 4 bytes each that do not compress on their own.
        let mut state: u32 = 7;
        let comment: String = (0..2_000)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                char::from_u32(0x1_0000 + (state >> 12) % 0xF_0000).unwrap_or('𝒜')
            })
            .collect();
        assert_eq!(comment.len(), 8_000);
        let findings: String = (0..100)
            .map(|i| format!("{{\"id\":\"f-{i}\",\"comment\":\"{comment}\"}}"))
            .collect::<Vec<_>>()
            .join(",");
        let packed = pack(findings.as_bytes()).unwrap();
        assert!(
            packed.len() < 2 * comment.len(),
            "{} bytes packed to {}",
            findings.len(),
            packed.len()
        );
        assert_eq!(unpack(&packed, "test").unwrap(), findings.as_bytes());
    }

    #[test]
    fn what_is_not_a_packed_value_is_refused() {
        assert!(unpack(b"not zstd", "test").is_err());
        let huge = pack(&vec![0u8; MAX_UNPACKED + 1]).unwrap();
        assert!(unpack(&huge, "test").is_err(), "beyond the bound");
    }
}
