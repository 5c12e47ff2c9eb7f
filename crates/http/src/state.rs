//! What handlers need: the ports (as trait objects) and the HTTP configuration.

use std::{sync::Arc, time::Duration};

use posture_domain::{
    ports::{
        ApiKeyRepository, AuditRepository, ClientRepository, DeliveryRepository, DirectSender,
        EventRepository, IdempotencyRepository, ScimRepository, StoreHealth, WebhookRepository,
    },
    rate_limit::RateLimiter,
    secrets::Keyring,
    webhook::TargetPolicy,
};

use crate::{
    client_ip::TrustedProxies,
    export_slots::ExportSlots,
    readiness::ReadinessCache,
    reads::{ReadReplicas, Reads},
};

/// The ports the HTTP API calls. The binary wires adapters into them.
#[derive(Clone)]
pub struct Ports {
    pub keys: Arc<dyn ApiKeyRepository>,
    /// OAuth clients: what the token endpoint reads of them.
    pub clients: Arc<dyn ClientRepository>,
    /// The read routes' ports on the primary.
    pub reads: Reads,
    /// Read replicas, when configured: the `GET`s of the analysed data go to a usable one
    /// (`reads.rs`).
    pub replicas: Option<Arc<dyn ReadReplicas>>,
    pub webhooks: Arc<dyn WebhookRepository>,
    /// The delivery log of subscriptions.
    pub deliveries: Arc<dyn DeliveryRepository>,
    /// The events feed.
    pub events: Arc<dyn EventRepository>,
    /// `Idempotency-Key`s of the POSTs that create or act.
    pub idempotency: Arc<dyn IdempotencyRepository>,
    /// SCIM's users and groups (`/scim/v2`).
    pub scim: Arc<dyn ScimRepository>,
    /// The customer's audit feed.
    pub audit: Arc<dyn AuditRepository>,
    pub health: Arc<dyn StoreHealth>,
    pub limiter: Arc<dyn RateLimiter>,
}

/// Shared state of every worker.
#[derive(Clone)]
pub struct ApiState {
    pub ports: Ports,
    /// Proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: TrustedProxies,
    /// Counts every request of a customer's keys together, besides each key's own bucket
    /// (`POSTURE_CUSTOMER_RATE_LIMIT`); `None`: no such budget.
    pub customer_limiter: Option<Arc<dyn RateLimiter>>,
    /// What each customer may spend (docs/operations.md, "Fair shares").
    pub budgets: Budgets,
    /// Seals webhook signing secrets.
    pub keyring: Arc<Keyring>,
    /// Which webhook receivers are accepted.
    pub webhook_policy: TargetPolicy,
    /// Test deliveries and the delivery log's retention.
    pub webhook_ops: WebhookOps,
    /// Requests waiting on the events feed.
    pub event_waits: crate::event_waits::EventWaits,
    /// Bounds the exports streaming at once (each holds a database connection), fairly.
    pub exports: Arc<ExportSlots>,
    /// An export whose client takes nothing for this long is ended.
    pub export_stall: Duration,
    /// Renders the Prometheus metrics for `GET /metrics`; `None` when they are served on a
    /// separate address (or not at all).
    pub metrics: Option<MetricsRender>,
    /// Serving TLS: responses carry `Strict-Transport-Security`.
    pub hsts: bool,
    /// Serve the API reference page at `/api/v1/docs` (`POSTURE_DOCS`).
    pub docs: bool,
    /// The last database check of `/readyz`.
    pub readiness: Arc<ReadinessCache>,
    /// What time it is: the store's clock ([`posture_domain::clock`]).
    pub clock: Arc<dyn posture_domain::clock::Clock>,
    /// The service's public base URL (`POSTURE_PUBLIC_URL`, `https://posture.example.com`):
    /// the URLs the service names itself by (SCIM's `Location`, `meta.location`, `$ref`)
    /// are built from it. `None`: from the request as it reached the service (its `Host`;
    /// forwarding headers believed from the trusted proxies only).
    pub public_url: Option<String>,
    /// How long the access tokens of `POST /oauth/token` live (`POSTURE_TOKEN_LIFETIME_MINUTES`).
    pub token_lifetime: chrono::Duration,
    /// The OpenAPI document, rendered once ([`crate::openapi::render`], when the binary
    /// builds the state), for
    /// `GET /openapi.json`.
    pub contract: actix_web::web::Bytes,
}

/// What each customer may spend, all its keys together: counted through Redis when it is
/// configured (one budget over every instance), in each instance's process otherwise.
#[derive(Clone)]
pub struct Budgets {
    /// Triage writes, a bulk once ([`posture_domain::triage::WRITE_RATE`]).
    pub triage_writes: Arc<dyn RateLimiter>,
    /// What triage writes add to storage, in bytes ([`posture_domain::triage::BYTES_RATE`]).
    pub triage_bytes: Arc<dyn RateLimiter>,
    /// SCIM writes ([`posture_domain::scim::WRITE_RATE`]).
    pub scim_writes: Arc<dyn RateLimiter>,
    /// Token requests of each OAuth client ([`posture_domain::oauth::TOKEN_RATE`]).
    pub token_requests: Arc<dyn RateLimiter>,
    /// Places held while a request lasts: waits on the events feed, exports.
    pub places: Arc<dyn posture_domain::rate_limit::Places>,
}

/// What the webhook operation routes need beyond the ports.
#[derive(Clone)]
pub struct WebhookOps {
    /// Sends test deliveries at once.
    pub sender: Arc<dyn DirectSender>,
    /// Counts test deliveries per subscription ([`posture_domain::delivery::TEST_RATE`]).
    pub test_limiter: Arc<dyn RateLimiter>,
    /// Counts test deliveries per customer, all subscriptions together
    /// ([`posture_domain::delivery::TEST_CUSTOMER_RATE`]).
    pub customer_test_limiter: Arc<dyn RateLimiter>,
    /// How long the delivery log keeps finished deliveries (a recovery cannot reach
    /// further back).
    pub retention: chrono::Duration,
}

/// Renders the metrics in the Prometheus text format.
pub type MetricsRender = Arc<dyn Fn() -> String + Send + Sync>;

/// Exports streaming at once per instance, at most, by default.
pub const DEFAULT_CONCURRENT_EXPORTS: usize = 4;
/// How long a request waits for an export slot, by default.
pub const DEFAULT_EXPORT_WAIT: Duration = Duration::from_secs(5);
/// How long an export may wait for its client to take the next chunk, by default.
pub const DEFAULT_EXPORT_STALL: Duration = Duration::from_secs(30);
