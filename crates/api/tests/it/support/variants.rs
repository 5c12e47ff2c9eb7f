//! The test server's variants: limits, proxies, budgets, clocks and settings a test sets
//! apart from the defaults.

use std::{sync::Arc, time::Duration};

use chrono::Utc;
use posture_domain::{
    clock::{Clock, ManualClock},
    rate_limit::{RateLimiter, RatePolicy},
    webhook::TargetPolicy,
};
use posture_http::{TrustedProxies, event_waits::EventWaits};

use super::{Options, TestApp};

impl TestApp {
    /// A server that refuses private webhook targets, as in production.
    pub async fn strict_webhooks() -> Self {
        Self::build(Options {
            webhook_policy: TargetPolicy {
                allow_private: false,
            },
            ..Options::default()
        })
        .await
    }

    /// A server with this limiter and these trusted proxies.
    pub async fn with_limiter(
        limiter: impl FnOnce() -> Arc<dyn RateLimiter>,
        proxies: TrustedProxies,
    ) -> Self {
        Self::build(Options {
            limiter: limiter(),
            proxies,
            ..Options::default()
        })
        .await
    }

    /// A server behind a TLS-terminating proxy on loopback, which the operator trusts
    /// (`POSTURE_TRUSTED_PROXIES=127.0.0.1`): its `X-Forwarded-*` headers are believed.
    pub async fn behind_trusted_proxy() -> Self {
        Self::build(Options {
            proxies: TrustedProxies::parse("127.0.0.1,::1").unwrap(),
            ..Options::default()
        })
        .await
    }

    /// A server behind the trusted proxy on loopback ([`TestApp::behind_trusted_proxy`])
    /// whose store reads a clock the test moves ([`TestApp::clock`]).
    pub async fn behind_trusted_proxy_with_clock() -> Self {
        Self::build(Options {
            proxies: TrustedProxies::parse("127.0.0.1,::1").unwrap(),
            clock: Some(Arc::new(ManualClock::starting_now())),
            ..Options::default()
        })
        .await
    }

    /// A server whose keys may make `per_key` requests a window each and a customer's keys
    /// `per_customer` together.
    pub async fn with_customer_limit(per_key: u32, per_customer: u32) -> Self {
        let policy = |limit| RatePolicy {
            limit,
            window_secs: 900,
        };
        Self::build(Options {
            // On a clock nobody moves: a window never turns over mid-test.
            limiter: Arc::new(crate::harness::held_limiter(policy(per_key))),
            customer_limiter: Some(Arc::new(crate::harness::held_limiter(policy(per_customer)))),
            ..Options::default()
        })
        .await
    }

    /// A server with these export slots, wait and stall bounds.
    pub async fn with_exports(slots: usize, wait: Duration, stall: Duration) -> Self {
        Self::build(Options {
            exports: slots,
            export_wait: wait,
            export_stall: stall,
            ..Options::default()
        })
        .await
    }

    /// A server whose database sessions have these timeouts (as `serve` sets them).
    pub async fn with_db_timeouts(statement: Duration, idle_in_transaction: Duration) -> Self {
        Self::build(Options {
            db_timeouts: (Some(statement), Some(idle_in_transaction)),
            export_stall: Duration::from_secs(60),
            ..Options::default()
        })
        .await
    }

    /// A server with the console switched off (`POSTURE_CONSOLE=false`).
    pub async fn without_console() -> Self {
        Self::build(Options {
            console_sign_in_limit: None,
            ..Options::default()
        })
        .await
    }

    /// A server whose console allows this many sign-in attempts per address.
    pub async fn with_sign_in_limit(limit: u32) -> Self {
        Self::build(Options {
            console_sign_in_limit: Some(limit),
            ..Options::default()
        })
        .await
    }

    /// A server with the API reference page turned off (`POSTURE_DOCS=false`).
    pub async fn without_docs() -> Self {
        Self::build(Options {
            docs: false,
            ..Options::default()
        })
        .await
    }

    /// A server over a database of its own on another PostgreSQL server (a superuser's
    /// URL).
    pub async fn on_server(server: &str) -> Self {
        Self::build(Options {
            server: Some(server.to_owned()),
            ..Options::default()
        })
        .await
    }

    /// A server whose public base URL (`POSTURE_PUBLIC_URL`) is `url`.
    pub async fn with_public_url(url: &str) -> Self {
        Self::build(Options {
            public_url: Some(url.to_owned()),
            ..Options::default()
        })
        .await
    }

    /// A server whose store reads a clock the test moves ([`TestApp::clock`]), starting at
    /// the system's time.
    pub async fn with_clock() -> Self {
        Self::build(Options {
            clock: Some(Arc::new(ManualClock::starting_now())),
            ..Options::default()
        })
        .await
    }

    /// The clock of a server built [`TestApp::with_clock`].
    pub fn clock(&self) -> &ManualClock {
        self.clock
            .as_deref()
            .expect("built with TestApp::with_clock")
    }

    /// Moves the clock to 6 seconds past the system's now: the audit feed serves lines 5
    /// seconds old by the server's clock, of the database's time of writing.
    pub fn settle_audit(&self) {
        let behind = Utc::now() - self.now() + chrono::Duration::seconds(6);
        if let Ok(behind) = behind.to_std() {
            self.clock().advance(behind);
        }
    }

    /// The time on the store's clock.
    pub fn now(&self) -> chrono::DateTime<Utc> {
        self.clock.as_deref().map_or_else(Utc::now, Clock::now)
    }

    /// A server whose events feed waits and streams are as `set` makes them (a stream
    /// period, a heartbeat, a slow reader's bound).
    /// With the customers' budgets as `set` makes them of the default ones.
    pub async fn with_budgets(set: fn(posture_http::Budgets) -> posture_http::Budgets) -> Self {
        Self::build(Options {
            budgets: Some(set),
            ..Options::default()
        })
        .await
    }

    pub async fn with_event_waits(set: fn(EventWaits) -> EventWaits) -> Self {
        Self::build(Options {
            event_waits: Some(set),
            ..Options::default()
        })
        .await
    }

    /// A server that reaches PostgreSQL through [`FreezingProxy`] (in `self.proxy`).
    pub async fn behind_freezing_proxy() -> Self {
        Self::build(Options {
            proxied: true,
            ..Options::default()
        })
        .await
    }
}
