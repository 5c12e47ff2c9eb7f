//! The harness of the HTTP tests: a real `posture-api` server (the same wiring as `serve`)
//! on an ephemeral loopback port, over a database of the test's own, called with a real
//! HTTP client.

mod errors;
mod variants;

use std::{net::TcpListener, sync::Arc, time::Duration};

use chrono::Utc;
use posture_api::server;
use posture_domain::{
    CustomerScope, KeyId, Scope, ScopeSet,
    api_key::NewApiKey,
    clock::{ManualClock, system},
    console::Actor,
    delivery,
    ports::{ApiKeyRepository, DataVersionRepository},
    rate_limit::{RateLimiter, RatePolicy},
    webhook::TargetPolicy,
};
use posture_http::{TrustedProxies, event_waits::EventWaits};
use posture_rate_limit::InProcessRateLimiter;
use posture_store_postgres::PgStore;
use posture_test_support::{TestDb, fixtures, proxy::FreezingProxy};
use reqwest::{Client, Response, StatusCode};
use serde_json::Value;

pub use self::errors::{assert_error, assert_refused};

/// How a test server differs from the default one.
struct Options {
    limiter: Arc<dyn RateLimiter>,
    /// Each customer's budget, all keys together (`None`: none).
    customer_limiter: Option<Arc<dyn RateLimiter>>,
    proxies: TrustedProxies,
    webhook_policy: TargetPolicy,
    exports: usize,
    export_wait: Duration,
    export_stall: Duration,
    /// The API's PostgreSQL session timeouts: statement, idle in transaction.
    db_timeouts: (Option<Duration>, Option<Duration>),
    /// Reach PostgreSQL through a proxy that can freeze connections.
    proxied: bool,
    /// Serve the console, with this sign-in limit per address (`None`: no console).
    console_sign_in_limit: Option<u32>,
    /// Serve the API reference page (`POSTURE_DOCS`).
    docs: bool,
    /// The PostgreSQL server (a superuser's URL) when not `TEST_DATABASE_URL`'s.
    server: Option<String>,
    /// The store's clock, when the test holds it (`None`: the system's).
    clock: Option<Arc<ManualClock>>,
    /// The events feed's waiting places and streams, as the test sets them (`None`: as
    /// `serve` sets them by default).
    event_waits: Option<fn(EventWaits) -> EventWaits>,
    /// The customers' budgets, as the test sets them (`None`: as `serve` sets them, counted
    /// in this process).
    budgets: Option<fn(posture_http::Budgets) -> posture_http::Budgets>,
    /// `POSTURE_PUBLIC_URL` (`None`: unset).
    public_url: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            limiter: Arc::new(InProcessRateLimiter::new(
                RatePolicy::DEFAULT,
                posture_domain::clock::system(),
            )),
            customer_limiter: None,
            proxies: TrustedProxies::default(),
            webhook_policy: TargetPolicy {
                allow_private: true,
            },
            exports: posture_http::DEFAULT_CONCURRENT_EXPORTS,
            export_wait: posture_http::DEFAULT_EXPORT_WAIT,
            export_stall: posture_http::DEFAULT_EXPORT_STALL,
            db_timeouts: (None, None),
            proxied: false,
            console_sign_in_limit: Some(30),
            docs: true,
            server: None,
            clock: None,
            event_waits: None,
            budgets: None,
            public_url: None,
        }
    }
}

/// A running API over a fresh database.
pub struct TestApp {
    pub db: TestDb,
    pub store: PgStore,
    pub base: String,
    pub client: Client,
    /// The proxy between the server and PostgreSQL, when there is one.
    pub proxy: Option<FreezingProxy>,
    /// The store's clock, when the test holds it ([`TestApp::with_clock`]).
    clock: Option<Arc<ManualClock>>,
    handle: actix_web::dev::ServerHandle,
    /// The server's requests waiting on the events feed.
    pub event_waits: EventWaits,
}

/// The process-wide metrics recorder (installed once; every test server renders it).
fn metrics_handle() -> posture_startup::metrics::PrometheusHandle {
    static HANDLE: std::sync::OnceLock<posture_startup::metrics::PrometheusHandle> =
        std::sync::OnceLock::new();
    HANDLE
        .get_or_init(|| posture_startup::metrics::install_recorder().unwrap())
        .clone()
}

pub use crate::harness::{console_state, spawn_server, test_keyring};

pub fn client() -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

impl TestApp {
    /// A server with the default limits (1000 per 15 minutes), counted in-process.
    pub async fn start() -> Self {
        Self::build(Options::default()).await
    }

    async fn build(options: Options) -> Self {
        posture_test_support::logs::capture();
        let db = match &options.server {
            Some(server) => TestDb::on(server).await,
            None => TestDb::new().await,
        };
        let mut config = db.config();
        let proxy = options
            .proxied
            .then(|| FreezingProxy::start(db.server_addr()).unwrap());
        if let Some(proxy) = &proxy {
            config.url = db.url_through(proxy.addr());
        }
        (config.statement_timeout, config.idle_in_transaction_timeout) = options.db_timeouts;
        if let Some(clock) = &options.clock {
            config.clock = clock.clone();
        }
        let clock = options.clock.clone();
        let store = PgStore::new(&config).unwrap();
        let limiter = options.limiter;
        let proxies = options.proxies.clone();
        let mut state = server::api_state(
            &store,
            limiter.clone(),
            server::Wiring {
                trusted_proxies: options.proxies,
                keyring: test_keyring(),
                webhook_policy: options.webhook_policy,
                webhook_timeout: Duration::from_secs(2),
                delivery_retention: chrono::Duration::days(30),
                test_limiter: Arc::new(InProcessRateLimiter::new(
                    delivery::TEST_RATE,
                    posture_domain::clock::system(),
                )),
                customer_test_limiter: Arc::new(InProcessRateLimiter::new(
                    delivery::TEST_CUSTOMER_RATE,
                    posture_domain::clock::system(),
                )),
                // The budgets' windows on the test's clock, when it holds one.
                budgets: {
                    let budgets =
                        server::budgets_in_process(clock.clone().map_or_else(system, |c| c as _));
                    options.budgets.map_or(budgets.clone(), |set| set(budgets))
                },
                customer_limiter: options.customer_limiter,
                concurrent_exports: options.exports,
                export_wait: options.export_wait,
                export_stall: options.export_stall,
                metrics: Some(server::metrics_render(
                    metrics_handle(),
                    store.clone(),
                    None,
                    limiter.clone(),
                )),
                hsts: false,
                docs: options.docs,
                replicas: None,
            },
        )
        .unwrap();
        if let Some(set) = options.event_waits {
            state.event_waits = set(state.event_waits.clone());
        }
        state.public_url = options.public_url.clone();
        let event_waits = state.event_waits.clone();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (handle, addr) = spawn_server(
            listener,
            state,
            server::Serving {
                workers: 2,
                // As `serve` runs: each worker opens its own 4 of the pool's 8.
                worker_pools: Some(server::WorkerPools::split(store.clone(), None, 8, 2)),
                shutdown_timeout: Duration::from_secs(5),
                tls: None,
                console: options
                    .console_sign_in_limit
                    .map(|limit| console_state(&store, limit, limiter.clone(), proxies.clone())),
            },
            Some(store.clone()),
        );
        Self {
            db,
            store,
            base: format!("http://{addr}"),
            client: client(),
            proxy,
            clock,
            handle,
            event_waits,
        }
    }

    /// A customer with one connected tenant (returned as its id).
    pub async fn customer(&self, name: &str) -> (CustomerScope, String) {
        fixtures::customer_with_tenant(&self.store, name).await
    }

    /// A customer with one tenant holding one of each resource: identity `u1` (scored 70
    /// today), finding `f1` (critical, open, about `u1`) and recommendation `r1`.
    pub async fn customer_with_one_of_each(&self, name: &str) -> (CustomerScope, String) {
        let (scope, tenant) = self.customer(name).await;
        let today = Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
        self.ingest(
            scope,
            &[
                fixtures::identity("u1", &tenant, "Ada"),
                fixtures::finding("f1", &tenant, "critical", "open", "u1"),
                fixtures::recommendation("r1", &tenant, "u1"),
                fixtures::upr_score("u1", &tenant, 70, &today),
            ],
        )
        .await;
        (scope, tenant)
    }

    /// Runs an analyzer pass for the customer, then waits until the server serves the
    /// pass's data version: its cache hears the pass's `NOTIFY` just after the commit, so
    /// a request sent in between still carries the previous pass's `ETag` and
    /// `meta.syncedThrough` (as docs/api.md says). Every pass bumps the version.
    pub async fn ingest(&self, scope: CustomerScope, records: &[Value]) {
        let store = &self.store;
        let before = store.data_version(scope).await.unwrap().changes;
        self.ingest_unheard(scope, records).await;
        posture_test_support::waits::wait_for(
            "the server serving the pass's data version",
            Duration::from_secs(20),
            || async move { (store.data_version(scope).await.unwrap().changes > before).then_some(()) },
        )
        .await;
    }

    /// Runs an analyzer pass for the customer and returns at its commit, before the server
    /// has heard of it (for the tests of how soon it does).
    pub async fn ingest_unheard(&self, scope: CustomerScope, records: &[Value]) {
        fixtures::ingest(&self.store, scope, &fixtures::lines(records))
            .await
            .unwrap();
    }

    /// Issues a key holding every scope; returns the key.
    pub async fn key_with_every_scope(&self, scope: CustomerScope) -> String {
        let every: Vec<Scope> = ScopeSet::all().iter().collect();
        self.key(scope, &every).await.1
    }

    /// Issues a key with these scopes; returns (key id, key).
    pub async fn key(&self, scope: CustomerScope, scopes: &[Scope]) -> (KeyId, String) {
        self.key_expiring(scope, scopes, None).await
    }

    pub async fn key_expiring(
        &self,
        scope: CustomerScope,
        scopes: &[Scope],
        expires_at: Option<chrono::DateTime<Utc>>,
    ) -> (KeyId, String) {
        let scopes: ScopeSet = scopes.iter().copied().collect();
        let (key, secret) = NewApiKey::generate(
            scope.customer_id(),
            "test".into(),
            scopes,
            expires_at,
            Utc::now(),
        )
        .unwrap();
        let id = self
            .store
            .insert_key(key, &Actor::Operator)
            .await
            .unwrap()
            .id;
        (id, secret.expose().to_owned())
    }

    /// A key that may be used only from `allow_from` (networks or addresses).
    pub async fn key_allowed_from(
        &self,
        scope: CustomerScope,
        scopes: &[Scope],
        allow_from: &[&str],
    ) -> (KeyId, String) {
        let scopes: ScopeSet = scopes.iter().copied().collect();
        let (mut key, secret) = NewApiKey::generate(
            scope.customer_id(),
            "fenced".into(),
            scopes,
            None,
            Utc::now(),
        )
        .unwrap();
        key.allow_from = posture_domain::allow_list::AllowList::parse(allow_from).unwrap();
        let id = self
            .store
            .insert_key(key, &Actor::Operator)
            .await
            .unwrap()
            .id;
        (id, secret.expose().to_owned())
    }

    /// The customer's audit log, newest first (its first 200 lines).
    pub async fn audit_lines(
        &self,
        scope: CustomerScope,
    ) -> Vec<posture_domain::console::AuditEvent> {
        use posture_domain::ports::ConsoleRepository as _;
        self.store.audit_log(scope, None, 200).await.unwrap()
    }

    /// The id of a key issued by [`TestApp::key`].
    pub async fn store_key_id(&self, key: &str) -> KeyId {
        let secret = posture_domain::ApiKeySecret::parse(key).unwrap();
        self.store
            .authenticate(&secret.hash())
            .await
            .unwrap()
            .unwrap()
            .key_id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// GET with the key.
    pub async fn get(&self, path: &str, key: &str) -> Response {
        self.client
            .get(self.url(path))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
    }

    /// GET without a key; returns the JSON body.
    pub async fn get_public_json(&self, path: &str) -> Value {
        serde_json::from_str(&self.get_public_text(path).await).unwrap()
    }

    /// GET without a key; returns the text body.
    pub async fn get_public_text(&self, path: &str) -> String {
        self.client
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// GET with the key, expecting `status`; returns the JSON body.
    pub async fn get_json(&self, path: &str, key: &str, status: StatusCode) -> Value {
        let response = self.get(path, key).await;
        assert_eq!(response.status(), status, "GET {path}");
        response.json().await.unwrap()
    }

    /// `GET path` (200 expected) from `address`, as the trusted proxy forwards it.
    pub async fn get_json_from(&self, path: &str, key: &str, address: &str) -> Value {
        let response = self
            .client
            .get(self.url(path))
            .bearer_auth(key)
            .header("x-forwarded-for", address)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "GET {path} from {address}"
        );
        response.json().await.unwrap()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        let handle = self.handle.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(handle.stop(false));
            Some(())
        })
        .join();
    }
}
