//! Pagination: `limit` (default 100, clamped to 500) and zero-based `offset`.

use crate::error::Error;

/// Page size when the caller gives none.
pub const DEFAULT_LIMIT: u32 = 100;
/// Largest page; larger requests are clamped to it, never rejected.
pub const MAX_LIMIT: u32 = 500;
/// Largest offset accepted (keeps the value inside PostgreSQL's `bigint`).
pub const MAX_OFFSET: u64 = i64::MAX as u64;

/// One page of a list: how many rows, starting where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRequest {
    limit: u32,
    offset: u64,
}

impl Default for PageRequest {
    fn default() -> Self {
        Self {
            limit: DEFAULT_LIMIT,
            offset: 0,
        }
    }
}

impl PageRequest {
    /// `limit` must be 1 or more (above [`MAX_LIMIT`] it is clamped); `offset` is zero-based.
    pub fn new(limit: Option<u64>, offset: Option<u64>) -> Result<Self, Error> {
        let limit = match limit {
            None => DEFAULT_LIMIT,
            Some(0) => return Err(Error::invalid("limit", "must be 1 or more")),
            Some(n) => n.min(u64::from(MAX_LIMIT)) as u32,
        };
        let offset = offset.unwrap_or(0);
        if offset > MAX_OFFSET {
            return Err(Error::invalid(
                "offset",
                format!("must be at most {MAX_OFFSET}"),
            ));
        }
        Ok(Self { limit, offset })
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }
}

/// A page of rows and the number of rows matching before pagination.
#[derive(Clone, Debug, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: u64,
}

impl<T> Page<T> {
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            items: self.items.into_iter().map(f).collect(),
            total: self.total,
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
    fn offset_beyond_bigint_is_invalid() {
        assert!(PageRequest::new(None, Some(u64::MAX)).is_err());
    }
}
