//! How the store reaches PostgreSQL and sets up each connection.

use std::{fmt, sync::Arc, time::Duration};

use posture_domain::clock::Clock;

use crate::error;

/// How to reach PostgreSQL.
#[derive(Clone)]
pub struct PgConfig {
    /// `postgres://user:password@host:port/db`; contains a secret, so `Debug` hides it.
    pub url: String,
    /// Where the dedicated `LISTEN` connections go (the key cache, the worker's wake-ups),
    /// when not `url`: a direct URL to PostgreSQL when `url` is a transaction-mode pooler
    /// (PgBouncer), which cannot carry `LISTEN`.
    pub listen_url: Option<String>,
    /// Most connections the pool opens.
    pub max_connections: usize,
    /// How long a caller waits for a connection (and a new connection for the server)
    /// before the request fails as unavailable.
    pub acquire_timeout: Duration,
    /// PostgreSQL's `statement_timeout` on every pooled connection (`None`: the server's).
    pub statement_timeout: Option<Duration>,
    /// PostgreSQL's `idle_in_transaction_session_timeout` on every pooled connection.
    pub idle_in_transaction_timeout: Option<Duration>,
    /// Most keys a customer may hold at once (neither revoked nor expired): issuing one
    /// more is refused.
    pub max_active_keys: u32,
    /// Whether the credentials' uses are recorded (last use, new addresses): on unless an
    /// operator measures what recording costs (`POSTURE_RECORD_USE=off`).
    pub record_use: bool,
    /// The clock of the store's own decisions (a cached key's expiry, a console session's
    /// idle time and lifetime, a sign-in's lapse, a secret's overlap): the system's, or a
    /// test's.
    pub clock: Arc<dyn Clock>,
}

impl PgConfig {
    /// A configuration for `url` whose decisions run on `clock` (the process's one clock,
    /// made in `main`, or a test's).
    pub fn new(url: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        Self {
            url: url.into(),
            listen_url: None,
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout: None,
            idle_in_transaction_timeout: None,
            max_active_keys: posture_domain::api_key::DEFAULT_MAX_ACTIVE_KEYS,
            record_use: true,
            clock,
        }
    }
}

impl PgConfig {
    /// The `SET` statements every new pooled connection runs: the timeouts, and server
    /// messages in English where the role may choose them ([`error::ENGLISH_MESSAGES`]).
    pub(crate) fn session_settings(&self) -> String {
        let mut sql = String::from(error::ENGLISH_MESSAGES);
        for (name, value) in [
            ("statement_timeout", self.statement_timeout),
            (
                "idle_in_transaction_session_timeout",
                self.idle_in_transaction_timeout,
            ),
        ] {
            if let Some(value) = value {
                sql.push_str(&format!("SET {name} = {};", value.as_millis()));
            }
        }
        sql
    }
}

impl fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgConfig")
            .field("url", &"<redacted>")
            .field(
                "listen_url",
                &self.listen_url.as_ref().map(|_| "<redacted>"),
            )
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field(
                "idle_in_transaction_timeout",
                &self.idle_in_transaction_timeout,
            )
            .finish()
    }
}
