//! The binaries' flags, each with its environment variable, and how their values are read.

use std::{fmt, sync::Arc, time::Duration};

use base64::Engine as _;
use clap::{Args, ValueEnum};
use posture_domain::clock::Clock;
use posture_store_postgres::PgConfig;

/// Where PostgreSQL is.
#[derive(Args, Clone)]
pub struct DatabaseArgs {
    /// PostgreSQL URL, e.g. postgres://posture:secret@db:5432/posture (required: without
    /// it, and without the variable, the command says so by the variable's name).
    #[arg(
        long = "database-url",
        env = "DATABASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub database_url: Option<String>,
    /// A direct PostgreSQL URL for the LISTEN connections (the key cache, the worker's
    /// wake-ups) when DATABASE_URL is a transaction-mode pooler such as PgBouncer.
    #[arg(
        long = "database-listen-url",
        env = "POSTURE_DATABASE_LISTEN_URL",
        hide_env_values = true
    )]
    pub database_listen_url: Option<String>,
    /// Most connections this process opens to PostgreSQL. Small on purpose: past a few
    /// active connections per database core, more only queue inside PostgreSQL and stretch
    /// the tail latency (docs/performance.md).
    #[arg(long, env = "POSTURE_DB_POOL_SIZE", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub db_pool_size: u16,
    /// Most API keys a customer may hold at once (neither revoked nor expired), whoever
    /// issues them (the console or `keys issue`): each key has the whole per-key quota.
    #[arg(long, env = "POSTURE_MAX_ACTIVE_KEYS", default_value_t = posture_domain::api_key::DEFAULT_MAX_ACTIVE_KEYS, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_active_keys: u32,
    /// Whether credentials' uses are recorded (last use, where from, first uses from new
    /// addresses in the audit feed). Turn it off only to measure what recording costs:
    /// inactivity expiry reads the last use.
    #[arg(long, env = "POSTURE_RECORD_USE", default_value = "on", value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::Set)]
    pub record_use: bool,
}

impl DatabaseArgs {
    /// The store's settings, its decisions on `clock` (the process's, made in `main`).
    pub fn pg_config(&self, clock: Arc<dyn Clock>) -> Result<PgConfig, NoDatabaseUrl> {
        let mut config = PgConfig::new(self.url()?.to_owned(), clock);
        config.listen_url.clone_from(&self.database_listen_url);
        config.max_connections = usize::from(self.db_pool_size);
        config.acquire_timeout = Duration::from_secs(5);
        config.max_active_keys = self.max_active_keys;
        config.record_use = self.record_use;
        Ok(config)
    }

    /// The PostgreSQL URL, or why there is none.
    pub fn url(&self) -> Result<&str, NoDatabaseUrl> {
        self.database_url
            .as_deref()
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .ok_or(NoDatabaseUrl)
    }
}

/// Neither `DATABASE_URL` nor `--database-url` was given.
#[derive(Debug, thiserror::Error)]
#[error(
    "DATABASE_URL is not set: export DATABASE_URL=postgres://user:password@host:5432/posture \
     (or pass --database-url)"
)]
pub struct NoDatabaseUrl;

impl fmt::Debug for DatabaseArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseArgs")
            .field("database_url", &"<redacted>")
            .field(
                "database_listen_url",
                &self.database_listen_url.as_ref().map(|_| "<redacted>"),
            )
            .field("db_pool_size", &self.db_pool_size)
            .field("max_active_keys", &self.max_active_keys)
            .field("record_use", &self.record_use)
            .finish()
    }
}

/// The 32-byte key that encrypts webhook signing secrets at rest (`POSTURE_SECRET_KEY`,
/// base64). `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey(pub [u8; 32]);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

/// Why a configuration value cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("must be base64 (generate one with: openssl rand -base64 32)")]
    SecretKeyNotBase64(#[source] base64::DecodeError),
    #[error("must decode to 32 bytes, got {0} (openssl rand -base64 32)")]
    SecretKeyLength(usize),
    #[error("the secret keys cannot seal webhook secrets")]
    Keyring(#[source] posture_domain::Error),
    #[error("the Prometheus exporter cannot be set up")]
    Metrics(#[source] metrics_exporter_prometheus::BuildError),
}

/// Parses `POSTURE_SECRET_KEY`: base64 (standard alphabet) of exactly 32 bytes.
pub fn parse_secret_key(value: &str) -> Result<SecretKey, ConfigError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value.trim())
        .map_err(ConfigError::SecretKeyNotBase64)?;
    let key: [u8; 32] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| ConfigError::SecretKeyLength(b.len()))?;
    Ok(SecretKey(key))
}

/// Several `POSTURE_SECRET_KEY`s (comma-separated).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecretKeys(pub Vec<SecretKey>);

/// Parses a comma-separated list of secret keys (empty: none).
pub fn parse_secret_keys(value: &str) -> Result<SecretKeys, ConfigError> {
    value
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(parse_secret_key)
        .collect::<Result<Vec<_>, _>>()
        .map(SecretKeys)
}

/// The keys that seal webhook signing secrets.
#[derive(Args, Clone, Debug)]
pub struct SecretArgs {
    /// Base64 of 32 random bytes; seals webhook signing secrets at rest
    /// (generate one with: openssl rand -base64 32).
    #[arg(long, env = "POSTURE_SECRET_KEY", hide_env_values = true, value_parser = parse_secret_key)]
    pub secret_key: SecretKey,
    /// Earlier POSTURE_SECRET_KEYs (comma-separated), kept during a rotation to open the
    /// secrets they sealed.
    #[arg(long, env = "POSTURE_SECRET_KEYS_PREVIOUS", hide_env_values = true, default_value = "", value_parser = parse_secret_keys)]
    pub previous_secret_keys: SecretKeys,
}

impl SecretArgs {
    pub fn keyring(&self) -> Result<posture_domain::secrets::Keyring, ConfigError> {
        let previous: Vec<[u8; 32]> = self.previous_secret_keys.0.iter().map(|k| k.0).collect();
        posture_domain::secrets::Keyring::new(&self.secret_key.0, &previous)
            .map_err(ConfigError::Keyring)
    }
}

/// Webhook receivers.
#[derive(Args, Clone, Debug)]
pub struct WebhookArgs {
    /// Development and tests only: accept http:// receivers and loopback or private
    /// addresses (refused otherwise, as SSRF protection).
    #[arg(long, env = "POSTURE_WEBHOOK_ALLOW_PRIVATE")]
    pub webhook_allow_private: bool,
    /// Seconds a receiver has to answer (deliveries and test deliveries).
    #[arg(long = "timeout-secs", env = "POSTURE_WEBHOOK_TIMEOUT_SECS", default_value_t = posture_domain::delivery::DEFAULT_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=120))]
    pub timeout_secs: u64,
    /// Days the delivery log keeps finished deliveries (the worker deletes older ones; a
    /// recovery cannot reach further back).
    #[arg(long, env = "POSTURE_DELIVERY_RETENTION_DAYS", default_value_t = posture_domain::delivery::DEFAULT_RETENTION_DAYS, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub delivery_retention_days: u32,
    /// Days the events feed (`GET /api/v1/events`) keeps events (the worker deletes older
    /// ones).
    #[arg(long, env = "POSTURE_EVENT_RETENTION_DAYS", default_value_t = posture_domain::event::DEFAULT_EVENT_RETENTION_DAYS, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub event_retention_days: u32,
    /// Days the customers' audit log (the console's audit page, `GET
    /// /api/v1/audit-events`) keeps lines (the worker deletes older ones; 30 at the least).
    #[arg(long, env = "POSTURE_AUDIT_RETENTION_DAYS", default_value_t = posture_domain::audit::DEFAULT_AUDIT_RETENTION_DAYS, value_parser = clap::value_parser!(u32).range(30..=3650))]
    pub audit_retention_days: u32,
}

impl WebhookArgs {
    /// How long the audit log keeps lines.
    pub fn audit_retention(&self) -> chrono::Duration {
        chrono::Duration::days(i64::from(self.audit_retention_days))
    }

    /// How long the events feed keeps events.
    pub fn event_retention(&self) -> chrono::Duration {
        chrono::Duration::days(i64::from(self.event_retention_days))
    }

    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout_secs)
    }

    /// How long the delivery log keeps finished deliveries.
    pub fn retention(&self) -> chrono::Duration {
        chrono::Duration::days(i64::from(self.delivery_retention_days))
    }

    pub fn policy(&self) -> posture_domain::webhook::TargetPolicy {
        if self.webhook_allow_private {
            tracing::warn!(
                "POSTURE_WEBHOOK_ALLOW_PRIVATE is on: webhooks may target private addresses (development only)"
            );
        }
        posture_domain::webhook::TargetPolicy {
            allow_private: self.webhook_allow_private,
        }
    }
}

/// Log output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per event.
    Json,
}

/// Logging settings, shared by every subcommand.
#[derive(Args, Clone, Debug)]
pub struct LogArgs {
    /// Tracing filter, e.g. `info`, `posture_http=debug,info`.
    #[arg(
        long = "log",
        env = "POSTURE_LOG",
        default_value = "info",
        global = true
    )]
    pub filter: String,
    /// Log format.
    #[arg(
        long = "log-format",
        env = "POSTURE_LOG_FORMAT",
        value_enum,
        default_value_t,
        global = true
    )]
    pub format: LogFormat,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_key_must_be_32_bytes_of_base64() {
        let ok = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert_eq!(parse_secret_key(&ok).unwrap(), SecretKey([7u8; 32]));
        let short = base64::engine::general_purpose::STANDARD.encode([7u8; 16]);
        assert!(
            parse_secret_key(&short)
                .unwrap_err()
                .to_string()
                .contains("32 bytes")
        );
        assert!(
            parse_secret_key("not base64!")
                .unwrap_err()
                .to_string()
                .contains("base64")
        );
    }

    #[test]
    fn debug_never_shows_secrets() {
        let key = SecretKey([1u8; 32]);
        assert_eq!(format!("{key:?}"), "SecretKey(<redacted>)");
        let db = DatabaseArgs {
            database_url: Some("postgres://u:hunter2@h/db".into()),
            database_listen_url: Some("postgres://u:swordfish@h/db".into()),
            db_pool_size: 4,
            max_active_keys: 50,
            record_use: true,
        };
        assert!(!format!("{db:?}").contains("hunter2"));
        assert!(!format!("{db:?}").contains("swordfish"));
    }
}
