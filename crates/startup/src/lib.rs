//! What `posture-api` and `posture-worker` set up at start: their configuration (`args`: flags
//! with environment fallbacks, clap `env`, validated at start-up), logging (`telemetry`)
//! and the metrics exporter (`metrics`).
//!
//! A bad value stops the process before it does anything, with a message naming the flag
//! and its variable. Values that are secrets (`DATABASE_URL`, `POSTURE_SECRET_KEY`,
//! `REDIS_URL`) are hidden from `--help` and from `Debug`.

mod args;
pub mod metrics;
pub mod telemetry;

pub use args::{
    ConfigError, DatabaseArgs, LogArgs, LogFormat, NoDatabaseUrl, SecretArgs, SecretKey,
    SecretKeys, WebhookArgs, parse_secret_key, parse_secret_keys,
};
