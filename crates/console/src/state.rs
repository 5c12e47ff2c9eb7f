//! What the console's handlers share: the ports they call, the policies they hold and where
//! the console is served. Declared apart from the crate root so that every handler reads it
//! from a sibling, not from the module that composes them.

use std::sync::Arc;

use posture_domain::{
    console::SessionPolicy,
    ports::{
        ApiKeyRepository, AuditRepository, ClientRepository, ConsoleRepository, ScimRepository,
        SignInProvider,
    },
    rate_limit::RateLimiter,
    secrets::Keyring,
};
use posture_http::TrustedProxies;

/// Where the console is served.
pub const PREFIX: &str = "/console";

/// What the console's handlers call.
#[derive(Clone)]
pub struct ConsolePorts {
    pub keys: Arc<dyn ApiKeyRepository>,
    /// OAuth clients: issued, rotated and revoked as the operator's CLI does.
    pub clients: Arc<dyn ClientRepository>,
    pub console: Arc<dyn ConsoleRepository>,
    /// The customer's inactivity rule.
    pub audit: Arc<dyn AuditRepository>,
    /// The users and groups provisioned over SCIM (read only here).
    pub scim: Arc<dyn ScimRepository>,
    pub sign_in: Arc<dyn SignInProvider>,
    /// Counts sign-in attempts per client address (its own policy, apart from the API's).
    pub sign_in_limiter: Arc<dyn RateLimiter>,
    /// The API's limiter: every console request but the assets counts against its client
    /// address's budget.
    pub request_limiter: Arc<dyn RateLimiter>,
}

/// Shared state of the console.
#[derive(Clone)]
pub struct ConsoleState {
    pub ports: ConsolePorts,
    /// Opens the customers' sealed client secrets.
    pub keyring: Arc<Keyring>,
    pub sessions: SessionPolicy,
    /// The service's public base URL (`https://posture.example.com`), from which redirect
    /// URIs are built; `None`: from each request's scheme and `Host`.
    pub public_url: Option<String>,
    /// Cookies are `Secure` even on requests that arrived over plain HTTP (TLS ends at a
    /// proxy). They are always `Secure` on HTTPS requests.
    pub secure_cookies: bool,
    /// Proxies whose `X-Forwarded-For` names the client (for the sign-in limit).
    pub trusted_proxies: TrustedProxies,
    /// What time it is: the store's clock (sessions' lifetimes, keys' expiry).
    pub clock: std::sync::Arc<dyn posture_domain::clock::Clock>,
}
