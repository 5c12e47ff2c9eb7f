//! End-to-end tests of posture-api: a real server over real HTTP, a real PostgreSQL database
//! per test, and the real binary for the operator commands. Files mirror the route tree.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod auth;
mod bodies;
mod budgets;
mod cli;
mod compression;
mod console;
mod contract;
mod customer_cli;
mod defaults;
mod docs_page;
mod errors;
mod failover;
mod harness;
mod metrics;
mod migrate;
mod newer_analyzer;
pub(crate) mod oauth;
mod operations;
mod pgbouncer;
mod rate_limits;
mod recorded_examples;
mod redis_tls;
mod replicas;
mod routes;
mod scim;
mod security;
mod support;
mod usage;
mod waits;
