//! posture's webhook delivery: renders bodies ([`render`]), signs them, sends them through
//! an SSRF-safe client ([`client`]) and works the outbox with retries ([`worker`]); test
//! deliveries go out at once through the same client ([`direct`]). It depends on the
//! domain's ports only; `posture-worker` wires the PostgreSQL store in.

pub mod client;
pub mod direct;
pub mod render;
pub mod secrets;
pub mod worker;

pub use client::{UNREACHABLE, UNREADABLE};
pub use direct::ImmediateSender;
pub use worker::{Sent, Worker, WorkerConfig};
