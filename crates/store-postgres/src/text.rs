//! Values of a closed set (severity, status, kind...) read from a text column, parsed from
//! the row's bytes: decoding a `String` first would allocate one per value and row.

use diesel::{
    deserialize::{self, FromSql, FromSqlRow},
    pg::{Pg, PgValue},
    sql_types::Text,
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
