//! What the lists share for paging by key and for keeping in sync: the customer's pass
//! bound, the sort keys of the orders by id and by modification, and their SQL conditions.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    PageRequest, Result,
    page::{KeyPart, KeyReader, SortKey, Start},
};
use uuid::Uuid;

use crate::schema::customers;

/// The customer's newest committed pass (the bound of an order by modification); `None`
/// before its first pass.
pub(crate) async fn synced_through(
    conn: &AsyncPgConnection,
    customer: Uuid,
) -> diesel::QueryResult<Option<DateTime<Utc>>> {
    customers::table
        .find(customer)
        .select(customers::synced_through)
        .get_result(&mut &*conn)
        .await
        .optional()
        .map(Option::flatten)
}

/// The key a page starts after, read by `read` (which refuses a key of another shape).
pub(crate) fn after_key<K>(
    page: &PageRequest,
    read: impl Fn(&SortKey) -> Result<K>,
) -> Result<Option<K>> {
    match page.start() {
        Start::Offset(_) => Ok(None),
        Start::After(key) => read(key).map(Some),
    }
}

/// The key of a row in an order by one text or uuid column.
pub(crate) fn text_key(id: impl Into<String>) -> SortKey {
    SortKey(vec![KeyPart::Text(id.into())])
}

pub(crate) fn read_text_key(key: &SortKey) -> Result<String> {
    let mut reader = KeyReader::new(key);
    let id = reader.text()?.to_owned();
    reader.end()?;
    Ok(id)
}

/// The key of a row in an order by (time, id): modification, creation.
pub(crate) fn time_key(at: DateTime<Utc>, id: impl Into<String>) -> SortKey {
    SortKey(vec![KeyPart::Time(at), KeyPart::Text(id.into())])
}

pub(crate) fn read_time_key(key: &SortKey) -> Result<(DateTime<Utc>, String)> {
    let mut reader = KeyReader::new(key);
    let at = reader.time()?;
    let id = reader.text()?.to_owned();
    reader.end()?;
    Ok((at, id))
}

/// `(table.time_column, table.id) > (at, id)`: the rows after a key in an order by (time, id),
/// one range of an index on them. `columns` is the SQL text of the pair, e.g.
/// `"(findings.modified_at, findings.id)"`; `id_type` the SQL type of the id.
macro_rules! after_time_key {
    ($columns:literal, $id_type:ty, $at:expr, $id:expr) => {
        diesel::dsl::sql::<diesel::sql_types::Bool>(concat!($columns, " > ("))
            .bind::<diesel::sql_types::Timestamptz, _>($at)
            .sql(", ")
            .bind::<$id_type, _>($id)
            .sql(")")
    };
}
pub(crate) use after_time_key;
