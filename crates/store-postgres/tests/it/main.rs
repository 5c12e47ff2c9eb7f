//! Integration tests of the PostgreSQL adapter, against a real PostgreSQL (one database per
//! test, cloned from a migrated template).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod api_keys;
mod events;
mod identities;
mod ingest;
mod messages;
mod migrations;
mod notifications;
mod pools;
mod privileges;
mod schema;
mod scim_limits;
mod statistics;
mod tenants;
mod tls;
mod triage;
mod triage_storage;
mod triage_waits;
mod triggers;
