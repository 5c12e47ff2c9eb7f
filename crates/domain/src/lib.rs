//! posture's domain: the model, its rules, and the ports (repository traits) that adapters
//! implement.
//!
//! This crate knows no I/O: no database, no HTTP, no async runtime. Adapters
//! (`posture-store-postgres`, `posture-rate-limit`, ...) implement the traits in [`ports`]; the
//! binaries wire them together. Every port method that reads customer data takes a
//! [`CustomerScope`] first, so a query that forgets the customer does not compile.

#[macro_use]
mod macros;

pub mod allow_list;
pub mod api_key;
pub mod audit;
pub mod clock;
mod closed_set;
pub mod console;
pub mod credential;
pub mod cursor;
pub mod customer;
pub mod delivery;
pub mod egress;
pub mod error;
pub mod event;
pub mod event_type;
pub mod fair_share;
pub mod finding;
pub mod idempotency;
pub mod identity;
pub mod ids;
pub mod ingest;
pub mod oauth;
pub mod outside;
pub mod page;
pub mod ports;
pub mod rate_limit;
pub mod recommendation;
pub mod scim;
pub mod secrets;
pub mod signature;
pub mod tenant;
pub mod test_delivery;
pub mod triage;
pub mod triage_bulk;
pub mod upr;
pub mod usage;
pub mod webhook;
pub mod webhook_change;
pub mod webhook_target;

pub use api_key::{ApiKey, ApiKeySecret, KeyHash, Scope, ScopeSet};
pub use closed_set::ClosedSet;
pub use credential::Principal;
pub use customer::{Customer, CustomerScope};
pub use error::{Error, Refusal, Result};
pub use ids::{
    CloudTenantId, CustomerId, DeliveryId, EventId, FindingId, IdentityId, KeyId, PassId,
    RecommendationId, WebhookId,
};
pub use page::{Page, PageRequest};
