//! The page parameters of the lists (`limit`, `offset`, `after`) and the parameters of
//! keeping in sync (`order`, `modifiedSince`).

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use posture_domain::{
    Error, PageRequest,
    cursor::{CursorError, MAX_CURSOR_LEN},
    page::OrderBy,
};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, de::Error as _};

use crate::query::{Integer, Limit, Offset, OneOf};

/// `limit`, and `offset` or `after`: the page of a list.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct PageQuery {
    /// Rows per page: default 100; above 500 it is clamped to 500, never rejected.
    pub limit: Option<Limit>,
    /// Zero-based index of the first row. Deep offsets cost more the deeper they go; to read
    /// a whole list, follow `meta.nextCursor` with `after` instead. Not with `after`, unless
    /// 0 (the default, which generated clients send).
    pub offset: Option<Offset>,
    /// Start after the last row of the previous page: its `meta.nextCursor` (or follow the
    /// `Link: rel="next"` header). A cursor is opaque and only valid with the same other
    /// query parameters (`limit` may change). As cheap at any depth. Not with an `offset`
    /// other than 0.
    pub after: Option<CursorParam>,
}

impl PageQuery {
    /// The page asked for (defaults filled in, `limit` clamped); the cursor is opened by the
    /// HTTP layer, which knows the request it must match.
    pub fn page(&self) -> Result<PageRequest, Error> {
        // `offset=0` is the default: generated clients send it with every request.
        if self.after.is_some() && self.offset.is_some_and(|offset| offset.get() != 0) {
            return Err(Error::invalid(
                "after",
                "cannot be combined with offset (a cursor says where the page starts)",
            ));
        }
        PageRequest::new(self.limit.map(Integer::get), self.offset.map(Integer::get))
    }
}

/// `after`: a cursor as given, bounded in length and alphabet (base64url).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CursorParam(pub String);

impl<'de> Deserialize<'de> for CursorParam {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(d)?;
        let well_formed = !text.is_empty()
            && text.len() <= MAX_CURSOR_LEN
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if well_formed {
            Ok(Self(text.into_owned()))
        } else {
            Err(D::Error::custom(CursorError::Mismatch))
        }
    }
}

impl JsonSchema for CursorParam {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Cursor")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_CURSOR_LEN,
            "pattern": "^[A-Za-z0-9_-]+$"
        })
    }
}

/// Longest `modifiedSince` accepted (an RFC 3339 time with nanoseconds and an offset is 35).
const MAX_TIME_LEN: usize = 64;

/// An RFC 3339 time (`2026-11-24T06:00:00.123456Z`), with an offset or `Z`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timestamp(pub DateTime<Utc>);

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(d)?;
        let parsed = (text.len() <= MAX_TIME_LEN)
            .then(|| DateTime::parse_from_rfc3339(&text).ok())
            .flatten();
        match parsed {
            Some(time) => Ok(Self(time.with_timezone(&Utc))),
            None => Err(D::Error::custom(format!(
                "must be an RFC 3339 time such as 2026-11-24T06:00:00Z, got {:?}",
                text.chars().take(MAX_TIME_LEN).collect::<String>()
            ))),
        }
    }
}

impl JsonSchema for Timestamp {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Timestamp")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "format": "date-time", "maxLength": MAX_TIME_LEN })
    }
}

/// `modifiedSince`: only what changed after a time.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModifiedSinceQuery {
    /// Only rows whose `modifiedAt` is later than this RFC 3339 time: give the
    /// `meta.syncedThrough` (or `X-Synced-Through`) of your previous sync. On a list,
    /// without `order`, the rows come by modification (`order=modified`), the order a sync
    /// reads in; `order=default` lists them in the list's own order instead (a view of
    /// recent changes, not a sync).
    pub modified_since: Option<Timestamp>,
}

/// `order`: the list's own order, or by modification.
///
/// It declares no default on purpose: what its absence means depends on `modifiedSince`
/// (by modification with it, the list's own order without), and a generated client sends
/// every declared default, which would turn a sync into a view.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct OrderQuery {
    /// `default`: the list's own order. `modified`: ascending `modifiedAt`, then id, up to
    /// the `meta.syncedThrough` of the first page (the order a sync reads in). Without it:
    /// `modified` when `modifiedSince` is given, the list's own order otherwise.
    pub order: Option<OneOf<OrderBy>>,
}
