//! posture's webhook delivery: renders bodies ([`render`]), signs them, sends them through
//! an SSRF-safe client ([`client`]) and works the outbox with retries ([`worker`]). It
//! depends on the domain's ports only; `posture-worker` wires the PostgreSQL store in.

pub mod client;
pub mod render;
pub mod worker;

pub use worker::{Sent, Worker, WorkerConfig};
