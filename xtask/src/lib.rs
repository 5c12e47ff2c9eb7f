//! What `cargo xtask` and the lab (`xtask/lab`, `posture-lab`) share: where the repository
//! is, running processes, installing what a task needs, and throwaway servers.
//!
//! Light on purpose: no HTTP, no database client, no posture crate but the servers', so
//! `cargo xtask tidy` on a fresh checkout builds in seconds.

pub mod citus;
pub mod files;
pub mod pgbouncer;
pub mod process;
pub mod servers;
pub mod setup;

/// The tasks the lab runs (`xtask/lab`): `cargo xtask <task>` builds and runs `posture-lab
/// <task>` for each, so they need the server's crates only when they are asked for.
pub const LAB_TASKS: &[&str] = &[
    "openapi",
    "schema",
    "fuzz",
    "console-e2e",
    "clients",
    "scim",
    "demo",
    "gen-data",
    "bench",
    "chaos",
    "soak",
    "bench-floor",
];
