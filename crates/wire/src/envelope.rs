//! The response envelopes: `{data, meta}` for lists, `{data}` for one resource.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::Serialize;

/// A page of a list.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[schemars(rename = "{T}List")]
pub struct ListResponse<T> {
    /// The rows of this page.
    pub data: Vec<T>,
    pub meta: ListMeta,
}

/// Pagination facts of a list response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    /// Rows matching the request before pagination.
    pub total: u64,
    /// The page size applied (after clamping to 500).
    pub limit: u32,
    /// The zero-based offset applied (0 for a page asked with `after`).
    pub offset: u64,
    /// The cursor of the next page (pass it as `after`, with the same other parameters);
    /// `null` on the last page. The `Link: rel="next"` header carries the same.
    pub next_cursor: Option<String>,
    /// On the lists that can be kept in sync (findings, identities, roles): the `modifiedAt`
    /// of the customer's newest committed analyzer pass. Store it and send it back as
    /// `modifiedSince` to read only what changed since this response. With `order=modified`
    /// it is fixed by the first page, and the pages go no further. Omitted before the first
    /// pass.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::time::option::serialize"
    )]
    pub synced_through: Option<DateTime<Utc>>,
    /// The tenant filter, resolved; omitted when no `tenant` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::tenant_id")]
    pub tenant: Option<String>,
}

/// One resource, directly under `data`.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[schemars(rename = "{T}Data")]
pub struct DataResponse<T> {
    pub data: T,
}
