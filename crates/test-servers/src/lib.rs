//! Throwaway servers for the tests and the contributor tasks: PostgreSQL and Redis
//! ([`servers`]) and a Citus cluster on loopback ([`citus`]), started as processes and
//! removed on drop. The standard library only, so that `cargo xtask` (which starts them for
//! `cargo xtask test`) builds in seconds; `posture-test-support` re-exports both and adds
//! what needs a database client.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    reason = "test harness: failing loudly is the point"
)]

pub mod citus;
pub mod servers;
