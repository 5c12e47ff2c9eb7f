//! The customer console's wiring: its ports on the store, the OpenID Connect relying party
//! (through the egress guard), the sign-in limiter and the session policy.

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use posture_console::{ConsolePorts, ConsoleState};
use posture_domain::{
    console::SessionPolicy,
    egress::EgressPolicy,
    rate_limit::{RateLimiter, RatePolicy},
    secrets::Keyring,
};
use posture_oidc::OidcSignIn;
use posture_store_postgres::PgStore;

use super::limiters::limiter_with;
use crate::config::{SIGN_IN_WINDOW_SECS, ServeArgs};

/// The console's state: its ports on `store`, the relying party, the sign-in limiter.
pub async fn console_state(
    args: &ServeArgs,
    store: &PgStore,
    keyring: Arc<Keyring>,
    request_limiter: Arc<dyn RateLimiter>,
) -> anyhow::Result<ConsoleState> {
    let sign_in_limiter = limiter_with(
        "console sign-ins per address",
        RatePolicy {
            limit: args.console.console_sign_in_limit,
            window_secs: SIGN_IN_WINDOW_SECS,
        },
        args.limits.redis_url.as_deref(),
        store.clock(),
    )
    .await?;
    Ok(ConsoleState {
        ports: console_ports(
            store,
            args.console.sso_allowed_networks.0.clone(),
            sign_in_limiter,
            request_limiter,
        )?,
        keyring,
        sessions: SessionPolicy {
            idle: Duration::from_secs(args.console.console_idle_minutes * 60),
            absolute: Duration::from_secs(args.console.console_session_hours * 3600),
        },
        public_url: args
            .console
            .public_url(args.bind, args.tls_cert.is_some())
            .map_err(|e| anyhow::anyhow!(e))?,
        secure_cookies: args.console.console_secure_cookies,
        trusted_proxies: args.limits.trusted_proxies.clone(),
        clock: store.clock(),
    })
}

/// The console's ports on `store`, its OpenID Connect client reaching providers at public
/// addresses and in `provider_networks` (the operator's allow-list).
pub fn console_ports(
    store: &PgStore,
    provider_networks: Vec<ipnet::IpNet>,
    sign_in_limiter: Arc<dyn RateLimiter>,
    request_limiter: Arc<dyn RateLimiter>,
) -> anyhow::Result<ConsolePorts> {
    Ok(ConsolePorts {
        keys: Arc::new(store.clone()),
        clients: Arc::new(store.clone()),
        console: Arc::new(store.clone()),
        audit: Arc::new(store.clone()),
        scim: Arc::new(store.clone()),
        sign_in: Arc::new(
            OidcSignIn::new(EgressPolicy {
                allow_private: false,
                allowed_networks: provider_networks,
            })
            .context("building the OpenID Connect client")?,
        ),
        sign_in_limiter,
        request_limiter,
    })
}
