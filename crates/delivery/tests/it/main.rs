//! Webhook deliveries end to end: analyzer passes through the real PostgreSQL store, the
//! worker, and real HTTP receivers on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod bodies;
mod credentials;
mod fair;
mod fanout;
mod gate;
mod hostile_receivers;
mod lifecycle;
mod races;
mod retention;
mod retries;
mod ssrf;
mod standard_webhooks;
mod support;
mod workers;
