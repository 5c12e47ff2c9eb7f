//! Tests of the routes, one file per resource, plus the rules every route keeps.

mod allow_lists;
mod audit;
mod bounds;
mod conditional;
mod cursors;
mod events;
mod events_stream;
mod every_route;
mod export;
mod export_limits;
mod export_ocsf;
mod findings;
mod idempotency;
mod identities;
mod inactivity;
mod keys;
mod roles;
mod sync;
mod tenants;
mod triage;
mod triage_bulk;
mod upr;
pub(crate) mod webhook_ops;
mod webhooks;
