//! posture-api: configuration, wiring of adapters into ports, the HTTP server, and the
//! operator commands. `main.rs` only parses the command line and dispatches here.

pub mod cli;
pub mod commands;
pub mod config;
mod output;
pub mod server;
