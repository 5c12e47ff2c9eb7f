//! posture's PostgreSQL adapter: the Diesel schema of `migrations/` and implementations of
//! the domain ports on diesel-async with a deadpool connection pool.
//!
//! Every query of customer data takes the `CustomerScope` and filters `customer_id` in its
//! SQL; composite foreign keys make a row's tenant belong to the same customer. Database
//! errors become domain errors in `error.rs`, at the port boundary.

mod api_keys;
mod audit;
mod caches;
mod clients;
mod compressed;
mod config;
mod connect;
mod console;
mod customers;
mod data_versions;
mod deliveries;
mod error;
mod events;
mod export;
mod finding_rows;
mod findings;
mod idempotency;
mod identities;
mod ingest;
pub mod migrations;
mod pool_health;
mod recommendations;
mod rendered;
mod replay;
mod replica_lag;
mod replicas;
mod schema;
mod scim;
pub mod spanning;
mod store;
mod sweeps;
mod sync;
mod tenants;
mod text;
mod triage;
mod triage_bulk;
mod triage_comments;
mod triage_expiry;
mod triage_history;
mod upr;
pub mod usage;
mod wake;
mod webhooks;

pub use crate::{
    caches::{APPLICATION_NAME as KEY_CACHE_APPLICATION_NAME, KeyCacheStats, VersionLookups},
    config::PgConfig,
    ingest::planned_rows,
    replicas::{ReplicaPolicy, ReplicaStatus, Replicas},
    store::{PgStore, PoolStatus},
};
