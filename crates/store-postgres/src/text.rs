//! Column values read straight from the row's bytes: values of a closed set (severity,
//! status, kind...) from a text column (decoding a `String` first would allocate one per
//! value and row), and timestamps.

use chrono::{DateTime, Utc};
use diesel::{
    deserialize::{self, FromSql, FromSqlRow},
    pg::{Pg, PgValue},
    sql_types::{Text, Timestamptz},
};

/// A `T` parsed from a text column. A value the set does not have is a deserialisation
/// error (the row is corrupt), like any undecodable column.
#[derive(Debug, FromSqlRow)]
pub(crate) struct Parsed<T>(pub(crate) T);

impl<T> FromSql<Text, Pg> for Parsed<T>
where
    T: std::str::FromStr + std::fmt::Debug,
    T::Err: std::fmt::Display,
{
    fn from_sql(value: PgValue<'_>) -> deserialize::Result<Self> {
        let text = std::str::from_utf8(value.as_bytes())?;
        text.parse()
            .map(Parsed)
            .map_err(|e| format!("unexpected value {text:?} in the database: {e}").into())
    }
}

/// A `timestamptz` read straight from its microseconds since 2000-01-01 UTC (diesel's own
/// conversion adds a duration to a date, several calendar steps a value, and a list page
/// has three hundred). Rows declare it with `#[diesel(deserialize_as = At)]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, FromSqlRow)]
pub(crate) struct At(DateTime<Utc>);

/// Seconds from the Unix epoch to PostgreSQL's (2000-01-01 00:00:00 UTC).
const POSTGRES_EPOCH: i64 = 946_684_800;

impl FromSql<Timestamptz, Pg> for At {
    fn from_sql(value: PgValue<'_>) -> deserialize::Result<Self> {
        let bytes: [u8; 8] = value
            .as_bytes()
            .try_into()
            .map_err(|_| "a timestamptz is 8 bytes")?;
        let micros = i64::from_be_bytes(bytes);
        micros
            .checked_add(POSTGRES_EPOCH * 1_000_000)
            .and_then(DateTime::from_timestamp_micros)
            .map(At)
            .ok_or_else(|| format!("timestamp {micros} µs after 2000 is out of range").into())
    }
}

impl From<At> for DateTime<Utc> {
    fn from(at: At) -> Self {
        at.0
    }
}

#[cfg(test)]
mod tests {
    use diesel::{deserialize::FromSql, pg::PgValue};

    use super::*;

    /// timestamptz's oid (not read by either conversion).
    const TIMESTAMPTZ: std::num::NonZeroU32 = std::num::NonZeroU32::new(1184).unwrap();

    fn decoded(micros: i64) -> deserialize::Result<DateTime<Utc>> {
        let bytes = micros.to_be_bytes();
        let value = PgValue::new(&bytes, &TIMESTAMPTZ);
        At::from_sql(value).map(DateTime::from)
    }

    #[test]
    fn reads_a_timestamptz_as_diesel_does() {
        for micros in [
            0i64,
            1,
            -1,
            847_012_345_678_901,
            -63_113_904_000_000_000,
            10_000_000_000_000_000,
        ] {
            let bytes = micros.to_be_bytes();
            let theirs: DateTime<Utc> =
                FromSql::<Timestamptz, Pg>::from_sql(PgValue::new(&bytes, &TIMESTAMPTZ)).unwrap();
            assert_eq!(decoded(micros).unwrap(), theirs, "{micros} µs");
        }
    }

    #[test]
    fn an_infinite_or_short_value_is_an_error_not_a_panic() {
        assert!(decoded(i64::MAX).is_err());
        assert!(decoded(i64::MIN).is_err());
        let short = PgValue::new(&[0u8; 4], &TIMESTAMPTZ);
        assert!(At::from_sql(short).is_err());
    }
}
