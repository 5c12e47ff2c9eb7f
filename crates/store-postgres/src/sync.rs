//! What the lists share for paging by key and for keeping in sync: the customer's pass
//! bound, the sort keys of the orders by id and by modification, and their SQL conditions.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    Page, PageRequest, Result,
    page::{KeyPart, KeyReader, ListOrder, SortKey, Start},
};
use uuid::Uuid;

use crate::{PgStore, error::db_error, schema::customer_sync};

/// The customer's newest committed pass (the bound of an order by modification); `None`
/// before its first pass. From `store`'s data-version cache when it holds the customer: the
/// gate read it there with the request's `ETag` version, before the route's queries, so it
/// is never newer than the rows the route then reads (a page reports a bound that is at
/// worst older than it could be: a sync from it reads a row again, never misses one).
pub(crate) async fn synced_through(
    store: &PgStore,
    conn: &AsyncPgConnection,
    customer: Uuid,
) -> diesel::QueryResult<Option<DateTime<Utc>>> {
    match store.cached_synced_through(customer) {
        Some(through) => Ok(through),
        None => read_synced_through(conn, customer).await,
    }
}

/// [`synced_through`] as the database has it now (an export reads it in its snapshot).
pub(crate) async fn read_synced_through(
    conn: &AsyncPgConnection,
    customer: Uuid,
) -> diesel::QueryResult<Option<DateTime<Utc>>> {
    customer_sync::table
        .find(customer)
        .select(customer_sync::synced_through)
        .get_result(&mut &*conn)
        .await
        .optional()
        .map(Option::flatten)
}

/// The pass bound of a list request. In the order by modification it is needed before the
/// page's query (carried by the cursor, or read first); in the list's own order it is only
/// reported (`meta.syncedThrough`), and read alongside the page.
pub(crate) enum PassBound {
    Known(Option<DateTime<Utc>>),
    Reported,
}

impl PassBound {
    pub(crate) async fn before_query(
        store: &PgStore,
        conn: &AsyncPgConnection,
        customer: Uuid,
        order: ListOrder,
    ) -> diesel::QueryResult<Self> {
        Ok(match order {
            ListOrder::Natural => PassBound::Reported,
            ListOrder::Modified { through: Some(t) } => PassBound::Known(Some(t)),
            ListOrder::Modified { through: None } => {
                PassBound::Known(synced_through(store, conn, customer).await?)
            }
        })
    }

    /// The bound of the order by modification (`None` before the customer's first pass).
    pub(crate) fn through(&self) -> Option<DateTime<Utc>> {
        match self {
            PassBound::Known(through) => *through,
            PassBound::Reported => None,
        }
    }

    /// The bound the page reports.
    pub(crate) async fn reported(
        &self,
        store: &PgStore,
        conn: &AsyncPgConnection,
        customer: Uuid,
    ) -> diesel::QueryResult<Option<DateTime<Utc>>> {
        match self {
            PassBound::Known(through) => Ok(*through),
            PassBound::Reported => synced_through(store, conn, customer).await,
        }
    }

    /// A list's page: its rows and its total, queried together with the bound the page
    /// reports (pipelined on one connection), the rows made items, sorted by `key`.
    pub(crate) async fn page<R, T>(
        &self,
        (store, conn, customer): (&PgStore, &AsyncPgConnection, Uuid),
        request: PageRequest,
        rows: impl Future<Output = diesel::QueryResult<Vec<R>>>,
        total: impl Future<Output = diesel::QueryResult<i64>>,
        item: impl FnMut(R) -> Result<T>,
        key: fn(&T) -> SortKey,
    ) -> Result<Page<T>> {
        let reported = self.reported(store, conn, customer);
        let (rows, total, through) = futures_util::future::try_join3(rows, total, reported)
            .await
            .map_err(db_error)?;
        let items = rows.into_iter().map(item).collect::<Result<Vec<_>>>()?;
        let mut page = request.page_of(items, total.max(0) as u64, key);
        page.synced_through = through;
        Ok(page)
    }
}

/// Orders the boxed query `$rows` of `$table` by (modified_at, id) up to `$through`, after
/// the page's key if it has one (`$columns`: the pair's SQL text, for the row comparison).
macro_rules! by_modification {
    ($rows:ident, $table:ident, $columns:literal, $through:expr, $page:expr) => {{
        $rows = $rows
            .filter($table::modified_at.le($through))
            .order(($table::modified_at, $table::id));
        if let Some((at, id)) = $crate::sync::after_key($page, $crate::sync::read_time_key)? {
            $rows = $rows.filter($crate::sync::after_time_key!(
                $columns,
                diesel::sql_types::Text,
                at,
                id
            ));
        }
    }};
}
pub(crate) use by_modification;

/// The keyset order of a list of `$table` rows, as `$page` asks: by `id`, or by
/// `(modified_at, id)` up to `$bound`'s pass (which narrows `$count` too), starting after the
/// page's key. Evaluates to the function giving a row's key; returns an empty page from the
/// enclosing function when the order by modification has no committed pass to stop at.
/// `|r: Row| id, modified` name a row's id and modification time.
macro_rules! keyset_order {
    ($rows:ident, $count:ident, $table:ident, $columns:literal, $page:expr, $bound:expr,
     |$row:ident: $ty:ty| $id:expr, $modified:expr) => {
        match $page.order() {
            posture_domain::page::ListOrder::Natural => {
                $rows = $rows.order($table::id);
                if let Some(id) = $crate::sync::after_key($page, $crate::sync::read_text_key)? {
                    $rows = $rows.filter($table::id.gt(id));
                }
                (|$row: &$ty| $crate::sync::text_key($id))
                    as fn(&$ty) -> posture_domain::page::SortKey
            }
            posture_domain::page::ListOrder::Modified { .. } => {
                let Some(through) = $bound.through() else {
                    return Ok(
                        $page.page_of(Vec::new(), 0, |$row: &$ty| $crate::sync::text_key($id))
                    );
                };
                $crate::sync::by_modification!($rows, $table, $columns, through, $page);
                $count = $count.filter($table::modified_at.le(through));
                (|$row: &$ty| $crate::sync::time_key($modified, $id))
                    as fn(&$ty) -> posture_domain::page::SortKey
            }
        }
    };
}
pub(crate) use keyset_order;

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
