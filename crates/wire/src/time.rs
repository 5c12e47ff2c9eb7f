//! Timestamps on the wire: RFC 3339 in UTC, byte for byte as chrono's `Serialize` writes them
//! (`2026-11-24T06:00:00Z`; as many fractional digits as the time needs: none, 3, 6 or 9),
//! but written straight into a buffer.
//!
//! chrono's `Serialize` goes through `Display`, which serde_json's escaping writer receives
//! one character at a time: a page of 100 findings carries 300 timestamps, and writing them
//! cost 12% of `posture-api`'s CPU on a list request (docs/performance.md, "Overhead per
//! request"). Every response type's timestamps are serialised here, with
//! `#[serde(serialize_with = "crate::time::serialize")]` (or `crate::time::option::serialize`).
//! A time this writer does not cover (a year outside 0..=9999, a leap second) falls back to
//! chrono's own writer, so the output never differs.

use chrono::{DateTime, Datelike as _, Timelike as _, Utc};
use serde::{Serialize as _, Serializer};

/// The longest form written here: `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`.
const MAX_LEN: usize = 30;

/// Serialises `time` as chrono does, faster.
pub fn serialize<S: Serializer>(time: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    let mut buf = [0u8; MAX_LEN];
    match write(time, &mut buf).and_then(|len| std::str::from_utf8(&buf[..len]).ok()) {
        Some(text) => serializer.serialize_str(text),
        None => time.serialize(serializer),
    }
}

/// For optional timestamps: `null` or [`serialize`]'s form.
pub mod option {
    use chrono::{DateTime, Utc};
    use serde::Serializer;

    pub fn serialize<S: Serializer>(
        time: &Option<DateTime<Utc>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match time {
            Some(time) => crate::time::serialize(time, serializer),
            None => serializer.serialize_none(),
        }
    }
}

/// Writes `n` as `width` decimal digits (`n` has no more digits than that).
fn digits(out: &mut [u8], mut n: u32, width: usize) {
    for slot in out[..width].iter_mut().rev() {
        *slot = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// The RFC 3339 form of `time` in `buf`, and its length; `None` for what only chrono writes.
fn write(time: &DateTime<Utc>, buf: &mut [u8; MAX_LEN]) -> Option<usize> {
    // Once: each of `DateTime`'s field getters converts it to the local (here UTC) time anew.
    let time = time.naive_utc();
    let year = u32::try_from(time.year()).ok().filter(|&y| y <= 9999)?;
    let nanos = time.nanosecond();
    if nanos >= 1_000_000_000 {
        return None;
    }
    digits(&mut buf[0..], year, 4);
    buf[4] = b'-';
    digits(&mut buf[5..], time.month(), 2);
    buf[7] = b'-';
    digits(&mut buf[8..], time.day(), 2);
    buf[10] = b'T';
    digits(&mut buf[11..], time.hour(), 2);
    buf[13] = b':';
    digits(&mut buf[14..], time.minute(), 2);
    buf[16] = b':';
    digits(&mut buf[17..], time.second(), 2);
    let mut len = 19;
    // chrono's `SecondsFormat::AutoSi`: the fewest of 0, 3, 6 or 9 digits that say it all.
    let (fraction, width) = if nanos == 0 {
        (0, 0)
    } else if nanos.is_multiple_of(1_000_000) {
        (nanos / 1_000_000, 3)
    } else if nanos.is_multiple_of(1_000) {
        (nanos / 1_000, 6)
    } else {
        (nanos, 9)
    };
    if width > 0 {
        buf[len] = b'.';
        digits(&mut buf[len + 1..], fraction, width);
        len += 1 + width;
    }
    buf[len] = b'Z';
    Some(len + 1)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;
    use proptest::prelude::*;

    use super::*;

    #[derive(serde::Serialize)]
    struct Ours(#[serde(serialize_with = "serialize")] DateTime<Utc>);

    fn ours(time: DateTime<Utc>) -> String {
        serde_json::to_string(&Ours(time)).unwrap()
    }

    fn chronos(time: DateTime<Utc>) -> String {
        serde_json::to_string(&time).unwrap()
    }

    #[test]
    fn whole_milli_micro_and_nano_seconds_are_written_as_chrono_writes_them() {
        let second = Utc.with_ymd_and_hms(2026, 11, 24, 6, 0, 0).unwrap();
        for (nanos, expected) in [
            (0, "\"2026-11-24T06:00:00Z\""),
            (120_000_000, "\"2026-11-24T06:00:00.120Z\""),
            (120_300_000, "\"2026-11-24T06:00:00.120300Z\""),
            (120_300_004, "\"2026-11-24T06:00:00.120300004Z\""),
            (5_000, "\"2026-11-24T06:00:00.000005Z\""),
        ] {
            let time = second + chrono::Duration::nanoseconds(nanos);
            assert_eq!(ours(time), expected);
            assert_eq!(chronos(time), expected);
        }
    }

    #[test]
    fn times_outside_the_fast_form_fall_back_to_chrono() {
        let far = Utc.with_ymd_and_hms(10_000, 1, 1, 0, 0, 0).unwrap();
        let before = Utc.with_ymd_and_hms(-1, 12, 31, 23, 59, 59).unwrap();
        let leap = Utc
            .with_ymd_and_hms(2016, 12, 31, 23, 59, 59)
            .unwrap()
            .with_nanosecond(1_500_000_000)
            .unwrap();
        for time in [far, before, leap] {
            assert_eq!(ours(time), chronos(time));
        }
        let none: Option<DateTime<Utc>> = None;
        let mut out = Vec::new();
        option::serialize(&none, &mut serde_json::Serializer::new(&mut out)).unwrap();
        assert_eq!(out, b"null");
    }

    proptest! {
        #[test]
        fn every_time_is_written_as_chrono_writes_it(
            seconds in -62_135_596_800i64..253_402_300_800,
            nanos in prop_oneof![
                Just(0u32),
                (0u32..1_000).prop_map(|n| n * 1_000_000),
                (0u32..1_000_000).prop_map(|n| n * 1_000),
                0u32..1_000_000_000,
            ],
        ) {
            let time = DateTime::from_timestamp(seconds, nanos).unwrap();
            prop_assert_eq!(ours(time), chronos(time));
        }
    }
}
