//! `posture`, the customers' command-line client of a posture service: `whoami`, `sync` into
//! SQLite, `export`, `listen --forward-to`, `findings triage`. It speaks only the public API (`/api/v1`) with a
//! key, or an OAuth client's tokens, from the environment; docs/cli.md is its manual.

pub mod args;
pub mod body;
pub mod client;
pub mod commands;
pub mod credential;
pub mod error;
pub mod export;
pub mod listen;
pub mod mirror;
pub mod output;
pub mod progress;
pub mod sync;
pub mod target;
pub mod tokens;
pub mod triage;
pub mod whoami;
