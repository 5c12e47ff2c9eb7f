//! Pagination: `limit` (default 100, clamped to 500), and where the page starts: a zero-based
//! `offset`, or after a row's sort key (keyset pagination, as cheap at any depth). Every page
//! says the sort key of its last row when more rows follow, so a client can go on with a
//! cursor whichever way it started. The lists that can be kept in sync also take an order by
//! modification with its window ([`ListOrder::Modified`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Refusal};

/// Page size when the caller gives none.
pub const DEFAULT_LIMIT: u32 = 100;
/// Largest page; larger requests are clamped to it, never rejected.
pub const MAX_LIMIT: u32 = 500;
/// Largest offset accepted (keeps the value inside PostgreSQL's `bigint`).
pub const MAX_OFFSET: u64 = i64::MAX as u64;

/// One value of a sort key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyPart {
    #[serde(rename = "i")]
    Int(i64),
    #[serde(rename = "t")]
    Time(DateTime<Utc>),
    #[serde(rename = "s")]
    Text(String),
}

/// The values a list's order compares, in order, for one row: where the next page starts.
/// Each adapter builds and reads the keys of its own lists; a key that does not have the
/// shape its list expects is refused as [`Error::Invalid`] on `after`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SortKey(pub Vec<KeyPart>);

impl SortKey {
    /// The error for a key of another shape (only a cursor made for another list has one,
    /// and cursors are authenticated, so this is a server change between two pages).
    pub fn mismatch() -> Error {
        Error::refused(
            Refusal::CursorMismatch,
            "after",
            "cursor does not match this request",
        )
    }
}

/// Where a page starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// Skip this many rows.
    Offset(u64),
    /// The first row after this key.
    After(SortKey),
}

string_enum! {
    /// The order a list is asked for (`order`).
    pub enum OrderBy ("order") {
        /// The list's own order.
        Default = "default",
        /// Ascending `modifiedAt`, then id.
        Modified = "modified",
    }
}

/// The order of a list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ListOrder {
    /// The list's own order (findings: most severe first; most lists: by id).
    #[default]
    Natural,
    /// Ascending `modifiedAt`, then id, up to `through`: the newest committed pass when the
    /// first page was read (`None` on the first page: the adapter reads it). Only the lists
    /// that can be kept in sync take it.
    Modified { through: Option<DateTime<Utc>> },
}

/// One page of a list: how many rows, starting where, in which order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRequest {
    limit: u32,
    start: Start,
    order: ListOrder,
}

impl Default for PageRequest {
    fn default() -> Self {
        Self {
            limit: DEFAULT_LIMIT,
            start: Start::Offset(0),
            order: ListOrder::Natural,
        }
    }
}

impl PageRequest {
    /// `limit` must be 1 or more (above [`MAX_LIMIT`] it is clamped); `offset` is zero-based.
    pub fn new(limit: Option<u64>, offset: Option<u64>) -> Result<Self, Error> {
        let limit = match limit {
            None => DEFAULT_LIMIT,
            Some(0) => {
                return Err(Error::refused(
                    Refusal::OutOfRange,
                    "limit",
                    "must be 1 or more",
                ));
            }
            Some(n) => n.min(u64::from(MAX_LIMIT)) as u32,
        };
        let offset = offset.unwrap_or(0);
        if offset > MAX_OFFSET {
            return Err(Error::refused(
                Refusal::OutOfRange,
                "offset",
                format!("must be at most {MAX_OFFSET}"),
            ));
        }
        Ok(Self {
            limit,
            start: Start::Offset(offset),
            order: ListOrder::Natural,
        })
    }

    /// The page after the row with `key` (the offset is then not used).
    pub fn after(mut self, key: SortKey) -> Self {
        self.start = Start::After(key);
        self
    }

    pub fn ordered(mut self, order: ListOrder) -> Self {
        self.order = order;
        self
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The rows an adapter fetches: one more than the page, to know whether another follows.
    pub fn fetch(&self) -> i64 {
        i64::from(self.limit) + 1
    }

    /// The offset applied: 0 for a page that starts after a key.
    pub fn offset(&self) -> u64 {
        match self.start {
            Start::Offset(offset) => offset,
            Start::After(_) => 0,
        }
    }

    pub fn start(&self) -> &Start {
        &self.start
    }

    pub fn order(&self) -> ListOrder {
        self.order
    }

    /// The page of `rows` (fetched with [`Self::fetch`]): at most `limit` of them, and the
    /// key of the last one when more follow.
    pub fn page_of<T>(&self, mut rows: Vec<T>, total: u64, key: impl Fn(&T) -> SortKey) -> Page<T> {
        let more = rows.len() > self.limit as usize;
        rows.truncate(self.limit as usize);
        let next = if more { rows.last().map(key) } else { None };
        Page {
            items: rows,
            total,
            next,
            synced_through: None,
        }
    }
}

/// A page of rows and the number of rows matching before pagination.
#[derive(Clone, Debug, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: u64,
    /// The sort key of the last row, when more rows follow.
    pub next: Option<SortKey>,
    /// For the lists that can be kept in sync: the `modifiedAt` of the customer's newest
    /// committed pass (the bound of an order by modification), `None` before its first pass.
    pub synced_through: Option<DateTime<Utc>>,
}

impl<T> Page<T> {
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            items: self.items.into_iter().map(f).collect(),
            total: self.total,
            next: self.next,
            synced_through: self.synced_through,
        }
    }
}

/// Reads the parts of a sort key in order, refusing a key of another shape.
pub struct KeyReader<'k>(std::slice::Iter<'k, KeyPart>);

impl<'k> KeyReader<'k> {
    pub fn new(key: &'k SortKey) -> Self {
        Self(key.0.iter())
    }

    pub fn int(&mut self) -> Result<i64, Error> {
        match self.0.next() {
            Some(KeyPart::Int(v)) => Ok(*v),
            _ => Err(SortKey::mismatch()),
        }
    }

    pub fn time(&mut self) -> Result<DateTime<Utc>, Error> {
        match self.0.next() {
            Some(KeyPart::Time(v)) => Ok(*v),
            _ => Err(SortKey::mismatch()),
        }
    }

    pub fn text(&mut self) -> Result<&'k str, Error> {
        match self.0.next() {
            Some(KeyPart::Text(v)) => Ok(v),
            _ => Err(SortKey::mismatch()),
        }
    }

    /// Ends the key: parts left over mean another shape.
    pub fn end(mut self) -> Result<(), Error> {
        match self.0.next() {
            None => Ok(()),
            Some(_) => Err(SortKey::mismatch()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_defaults_to_100() {
        assert_eq!(PageRequest::new(None, None).unwrap().limit(), 100);
    }

    #[test]
    fn limit_above_500_is_clamped_not_rejected() {
        assert_eq!(PageRequest::new(Some(1000), None).unwrap().limit(), 500);
        assert_eq!(PageRequest::new(Some(u64::MAX), None).unwrap().limit(), 500);
    }

    #[test]
    fn limit_zero_is_invalid() {
        assert!(matches!(
            PageRequest::new(Some(0), None),
            Err(Error::Invalid { field, .. }) if field == "limit"
        ));
    }

    #[test]
    fn a_page_keeps_limit_rows_and_names_the_last_key_when_more_follow() {
        let page = PageRequest::new(Some(2), None).unwrap();
        assert_eq!(page.fetch(), 3);
        let key = |n: &i64| SortKey(vec![KeyPart::Int(*n)]);
        let full = page.page_of(vec![1, 2, 3], 9, key);
        assert_eq!(full.items, vec![1, 2]);
        assert_eq!(full.next, Some(SortKey(vec![KeyPart::Int(2)])));
        let last = page.page_of(vec![1, 2], 9, key);
        assert_eq!(last.next, None);
    }

    #[test]
    fn a_key_of_another_shape_is_refused() {
        let key = SortKey(vec![KeyPart::Int(1), KeyPart::Text("a".into())]);
        let mut reader = KeyReader::new(&key);
        assert!(reader.time().is_err());
        let mut reader = KeyReader::new(&key);
        assert_eq!(reader.int().unwrap(), 1);
        assert!(reader.end().is_err());
    }

    #[test]
    fn offset_beyond_bigint_is_invalid() {
        assert!(PageRequest::new(None, Some(u64::MAX)).is_err());
    }
}
