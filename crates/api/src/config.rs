//! Configuration of `posture-api serve` (the settings shared with the worker live in
//! `posture-startup`).

use std::{fmt, net::SocketAddr, time::Duration};

use clap::Args;
use posture_domain::rate_limit::RatePolicy;
use posture_http::TrustedProxies;
use posture_startup::{DatabaseArgs, SecretArgs, WebhookArgs};
use posture_store_postgres::ReplicaPolicy;

/// Rate limits (docs/api.md, "Rate limits").
#[derive(Args, Clone)]
pub struct RateLimitArgs {
    /// Requests per key (or per client address, without a valid key) per window.
    #[arg(long, env = "POSTURE_RATE_LIMIT", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub rate_limit: u32,
    /// Length of the fixed window, in seconds.
    #[arg(long, env = "POSTURE_RATE_WINDOW_SECS", default_value_t = 900, value_parser = clap::value_parser!(u32).range(1..=86_400))]
    pub rate_window_secs: u32,
    /// Requests per customer per window, all its keys together, besides each key's own
    /// limit (default: 10 times POSTURE_RATE_LIMIT): a customer cannot multiply its quota by
    /// issuing keys.
    #[arg(long, env = "POSTURE_CUSTOMER_RATE_LIMIT", value_parser = clap::value_parser!(u32).range(1..=100_000_000))]
    pub customer_rate_limit: Option<u32>,
    /// Token requests per OAuth client per minute (`POST /oauth/token`).
    #[arg(long, env = "POSTURE_TOKEN_RATE_LIMIT", default_value_t = posture_domain::oauth::TOKEN_RATE.limit, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub token_rate_limit: u32,
    /// Redis URL; when set, limits are counted by all instances together.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<String>,
    /// Proxies (comma-separated addresses or CIDR networks) whose X-Forwarded-For names the
    /// client; empty: the TCP peer is the client.
    #[arg(long, env = "POSTURE_TRUSTED_PROXIES", default_value = "", value_parser = TrustedProxies::parse)]
    pub trusted_proxies: TrustedProxies,
}

impl RateLimitArgs {
    pub fn policy(&self) -> RatePolicy {
        RatePolicy {
            limit: self.rate_limit,
            window_secs: self.rate_window_secs,
        }
    }

    /// The token requests of each OAuth client, a minute's worth.
    pub fn token_policy(&self) -> RatePolicy {
        RatePolicy {
            limit: self.token_rate_limit,
            window_secs: posture_domain::oauth::TOKEN_RATE.window_secs,
        }
    }

    /// The budget of each customer, all its keys together, over the same window.
    pub fn customer_policy(&self) -> RatePolicy {
        RatePolicy {
            limit: self
                .customer_rate_limit
                .unwrap_or(self.rate_limit.saturating_mul(10)),
            window_secs: self.rate_window_secs,
        }
    }
}

impl fmt::Debug for RateLimitArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitArgs")
            .field("rate_limit", &self.rate_limit)
            .field("rate_window_secs", &self.rate_window_secs)
            .field("customer_rate_limit", &self.customer_rate_limit)
            .field("token_rate_limit", &self.token_rate_limit)
            .field("redis_url", &self.redis_url.as_ref().map(|_| "<redacted>"))
            .field("trusted_proxies", &self.trusted_proxies)
            .finish()
    }
}

/// The bounds on how long a client can hold the API's resources (docs/operations.md,
/// "Security").
#[derive(Args, Clone, Debug)]
pub struct TimeoutArgs {
    /// Longest a database statement of the API may run (PostgreSQL's `statement_timeout`).
    #[arg(long, env = "POSTURE_DB_STATEMENT_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub db_statement_timeout_ms: u64,
    /// Longest an API connection may sit idle inside a transaction (an export between pages)
    /// before PostgreSQL ends it (`idle_in_transaction_session_timeout`).
    #[arg(long, env = "POSTURE_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub db_idle_in_transaction_timeout_ms: u64,
    /// An export whose client takes nothing for this many seconds is ended, giving back its
    /// connection and slot (keep it below the idle-in-transaction timeout).
    #[arg(long, env = "POSTURE_EXPORT_STALL_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub export_stall_secs: u64,
    /// How long an export request waits for a free export slot before 503.
    #[arg(long, env = "POSTURE_EXPORT_WAIT_SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=300))]
    pub export_wait_secs: u64,
}

/// Read replicas (docs/scaling.md, "Read replicas").
#[derive(Args, Clone)]
pub struct ReplicaArgs {
    /// PostgreSQL streaming replicas (comma-separated URLs) that serve the reads of the
    /// analysed data and the exports while they keep up; everything else reads the primary.
    #[arg(
        long = "database-read-url",
        env = "POSTURE_DATABASE_READ_URL",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub database_read_urls: Vec<String>,
    /// A replica whose replay lag exceeds this many milliseconds is skipped (its reads go
    /// to another replica or the primary) until it catches up.
    #[arg(long, env = "POSTURE_REPLICA_MAX_LAG_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub replica_max_lag_ms: u64,
    /// How often each replica's lag is measured, in milliseconds.
    #[arg(long, env = "POSTURE_REPLICA_CHECK_MS", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(50..=60_000))]
    pub replica_check_ms: u64,
}

impl ReplicaArgs {
    /// The replica URLs given (an empty setting gives none).
    pub fn urls(&self) -> Vec<String> {
        self.database_read_urls
            .iter()
            .map(|url| url.trim())
            .filter(|url| !url.is_empty())
            .map(str::to_owned)
            .collect()
    }

    pub fn policy(&self) -> ReplicaPolicy {
        ReplicaPolicy {
            max_lag: Duration::from_millis(self.replica_max_lag_ms),
            check_every: Duration::from_millis(self.replica_check_ms),
        }
    }
}

impl fmt::Debug for ReplicaArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplicaArgs")
            .field(
                "database_read_urls",
                &format!("<{} redacted>", self.urls().len()),
            )
            .field("replica_max_lag_ms", &self.replica_max_lag_ms)
            .field("replica_check_ms", &self.replica_check_ms)
            .finish()
    }
}

/// The customer console (docs/console.md).
#[derive(Args, Clone, Debug)]
pub struct ConsoleArgs {
    /// Serve the customer console under /console/.
    #[arg(long = "console", env = "POSTURE_CONSOLE", default_value_t = true, action = clap::ArgAction::Set)]
    pub enabled: bool,
    /// The service's public base URL, e.g. https://posture.example.com: redirect URIs are
    /// built from it (default: each request's scheme and Host).
    #[arg(long, env = "POSTURE_PUBLIC_URL", value_parser = parse_public_url)]
    pub public_url: Option<String>,
    /// Minutes after which an unused console session ends.
    #[arg(long, env = "POSTURE_CONSOLE_IDLE_MINUTES", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=1440))]
    pub console_idle_minutes: u64,
    /// Hours after sign-in at which a console session ends, used or not.
    #[arg(long, env = "POSTURE_CONSOLE_SESSION_HOURS", default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=168))]
    pub console_session_hours: u64,
    /// Sign-in attempts (starts and callbacks) per client address per 10 minutes.
    #[arg(long, env = "POSTURE_CONSOLE_SIGN_IN_LIMIT", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub console_sign_in_limit: u32,
    /// Mark cookies Secure on plain-HTTP requests too (TLS ends at a proxy in front).
    #[arg(long, env = "POSTURE_CONSOLE_SECURE_COOKIES")]
    pub console_secure_cookies: bool,
    /// Networks (CIDR, comma-separated) where customers' identity providers may be reached
    /// besides public addresses: a provider inside the company's network. Every other
    /// private, loopback or link-local address is refused, whatever a discovery document
    /// names.
    #[arg(long, env = "POSTURE_SSO_ALLOWED_NETWORKS", default_value = "", value_parser = parse_networks)]
    pub sso_allowed_networks: Networks,
}

/// A list of networks (`10.20.0.0/16,2001:db8::/32`; a single address is /32 or /128).
#[derive(Clone, Debug, Default)]
pub struct Networks(pub Vec<ipnet::IpNet>);

pub(crate) fn parse_networks(list: &str) -> Result<Networks, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<ipnet::IpNet>()
                .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| format!("{s:?} is not an IP address or CIDR network"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Networks)
}

impl ConsoleArgs {
    /// The public base URL sign-in redirect URIs are built from: `POSTURE_PUBLIC_URL`, or,
    /// when the service listens on a loopback address only (development, tests),
    /// `http://<bind>`. A service reachable from elsewhere must be told its public URL while
    /// the console is on: the request's own `Host` is the client's to choose.
    pub fn public_url(&self, bind: SocketAddr, tls: bool) -> Result<Option<String>, String> {
        match (&self.public_url, self.enabled) {
            (Some(url), _) => Ok(Some(url.clone())),
            (None, false) => Ok(None),
            (None, true) if bind.ip().is_loopback() => {
                let scheme = if tls { "https" } else { "http" };
                Ok(Some(format!("{scheme}://{bind}")))
            }
            (None, true) => Err(format!(
                "POSTURE_PUBLIC_URL is required while the console is on and posture-api \
                 listens on {bind} (not loopback only): sign-in redirect URIs are built from \
                 it. Set it to the address browsers use (https://posture.example.com), or \
                 turn the console off (POSTURE_CONSOLE=false)"
            )),
        }
    }
}

/// The window of the console's sign-in limit.
pub const SIGN_IN_WINDOW_SECS: u32 = 600;

/// A public URL as `POSTURE_PUBLIC_URL` takes it: http(s)://host[:port][/path], without a
/// trailing slash.
pub(crate) fn parse_public_url(text: &str) -> Result<String, String> {
    let (scheme, rest) = text
        .split_once("://")
        .ok_or_else(|| format!("{text:?}: expected http(s)://host[:port]"))?;
    if !matches!(scheme, "http" | "https") || rest.is_empty() || rest.contains(['?', '#', '@']) {
        return Err(format!("{text:?}: expected http(s)://host[:port][/path]"));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// Settings of `posture-api serve`.
#[derive(Args, Clone, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub replicas: ReplicaArgs,
    #[command(flatten)]
    pub limits: RateLimitArgs,
    #[command(flatten)]
    pub timeouts: TimeoutArgs,
    /// Address to listen on.
    #[arg(long, env = "POSTURE_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    #[command(flatten)]
    pub secrets: SecretArgs,
    #[command(flatten)]
    pub webhooks: WebhookArgs,
    #[command(flatten)]
    pub console: ConsoleArgs,
    /// HTTP worker threads (default: one per CPU core).
    #[arg(long, env = "POSTURE_WORKERS", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub workers: Option<u16>,
    /// Serve the API reference page at /api/v1/docs (rendered in the browser from the
    /// served contract; public, like the contract).
    #[arg(long = "docs", env = "POSTURE_DOCS", default_value_t = true, action = clap::ArgAction::Set)]
    pub docs: bool,
    /// Serve `/metrics` on this address instead of the API's (keep it off the public ingress).
    #[arg(long, env = "POSTURE_METRICS_BIND")]
    pub metrics_bind: Option<SocketAddr>,
    /// PEM certificate chain: serve HTTPS (with HSTS) instead of HTTP.
    #[arg(long, env = "POSTURE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// PEM private key of the certificate.
    #[arg(long, env = "POSTURE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Seconds in-flight requests get to finish after SIGTERM.
    #[arg(long, env = "POSTURE_SHUTDOWN_TIMEOUT_SECS", default_value_t = 30)]
    pub shutdown_timeout_secs: u64,
    /// How long the access tokens of `POST /oauth/token` live: 1 to 60 minutes.
    #[arg(long, env = "POSTURE_TOKEN_LIFETIME_MINUTES", default_value_t = posture_domain::oauth::DEFAULT_TOKEN_LIFETIME.num_minutes(), value_parser = clap::value_parser!(i64).range(1..=posture_domain::oauth::MAX_TOKEN_LIFETIME.num_minutes()))]
    pub token_lifetime_minutes: i64,
    /// Longest a request waits on the events feed (`wait` is clamped to it): 1 to 30
    /// seconds. Lower it when a proxy in front of posture ends idle requests sooner.
    #[arg(long, env = "POSTURE_EVENT_MAX_WAIT_SECS", default_value_t = posture_domain::event::MAX_WAIT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=30))]
    pub event_max_wait_secs: u64,
    /// Longest a stream of the events feed (`Accept: text/event-stream`) lasts before it
    /// ends and its client reconnects with `Last-Event-ID`: 1 to 3600 seconds.
    #[arg(long, env = "POSTURE_EVENT_STREAM_SECS", default_value_t = posture_http::event_waits::DEFAULT_STREAM_FOR.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub event_stream_secs: u64,
}
