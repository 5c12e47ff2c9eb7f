//! `posture`, the customers' command-line client of a posture service: `whoami`, `sync` into
//! SQLite, `export`, `listen --forward-to`, `findings triage`. It speaks only the public API (`/api/v1`) with a
//! key from the environment; docs/cli.md is its manual.

pub mod args;
pub mod body;
pub mod client;
pub mod commands;
pub mod export;
pub mod listen;
pub mod mirror;
pub mod output;
pub mod progress;
pub mod sync;
pub mod target;
pub mod triage;
pub mod whoami;
