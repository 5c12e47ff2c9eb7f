//! posture's JSON wire types: what API responses, export lines and webhook bodies look like.
//!
//! Field names are camelCase; timestamps are RFC 3339 in UTC; absent optional values of a
//! resource are `null` (the shape of a resource never changes), while `meta.tenant` is
//! omitted when no tenant filter is given. Every type derives its JSON Schema, which the
//! OpenAPI document and the contract tests use. Conversions from domain types live here so
//! the API, the export and the webhook bodies cannot disagree.

pub mod audit;
pub mod cef;
pub mod deliveries;
pub mod envelope;
pub mod error;
pub mod events;
pub mod findings;
pub mod identities;
pub mod keys;
pub mod ndjson;
pub mod ocsf;
pub mod ocsf_audit;
pub mod paging;
pub mod query;
pub mod recommendations;
pub mod schemas;
pub mod tenants;
pub mod time;
pub mod triage;
pub mod triage_bulk;
pub mod upr;
pub mod webhooks;

pub use envelope::{DataResponse, ListMeta, ListResponse};
pub use error::{ErrorCode, ErrorResponse};
pub use schemas::{
    CLOSED_SET_MARKER, closed_set, closed_set_list, closed_set_name, event_types_request,
    finding_type, inline_closed_set, nullable_closed_set, nullable_tenant_id, tenant_id, uuid,
};
