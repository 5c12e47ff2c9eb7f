//! `posture-api serve`: wires the PostgreSQL store into the HTTP API and runs it.

use std::{net::TcpListener, path::Path, sync::Arc, time::Duration};

use actix_web::{HttpServer, dev::ServerHandle, web};
use anyhow::Context as _;
use posture_console::{ConsolePorts, ConsoleState};
use posture_delivery::ImmediateSender;
use posture_domain::egress::EgressPolicy;
use posture_domain::{
    console::SessionPolicy,
    delivery::{TEST_CUSTOMER_RATE, TEST_RATE},
    rate_limit::{InProcessRateLimiter, LimiterState, RateLimiter, RatePolicy},
    secrets::Keyring,
    webhook::TargetPolicy,
};
use posture_http::{ApiState, ExportSlots, MetricsRender, WebhookOps};
use posture_oidc::OidcSignIn;
use posture_redis::RedisRateLimiter;
use posture_store_postgres::{PgStore, Replicas, migrations};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};

mod ports;

pub use ports::{WorkerPools, ports};

use crate::config::{RateLimitArgs, SIGN_IN_WINDOW_SECS, ServeArgs};

/// How an API instance is wired, beyond its store and rate limiter.
pub struct Wiring {
    /// Proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: posture_http::TrustedProxies,
    /// Seals webhook signing secrets.
    pub keyring: Keyring,
    pub webhook_policy: TargetPolicy,
    /// How long a receiver has to answer a test delivery.
    pub webhook_timeout: Duration,
    /// How long the delivery log keeps finished deliveries.
    pub delivery_retention: chrono::Duration,
    /// Counts test deliveries per subscription (`TEST_RATE`; shared through Redis when set).
    pub test_limiter: Arc<dyn RateLimiter>,
    /// Counts test deliveries per customer (`TEST_CUSTOMER_RATE`).
    pub customer_test_limiter: Arc<dyn RateLimiter>,
    /// Counts each customer's requests, all keys together (`None`: no such budget).
    pub customer_limiter: Option<Arc<dyn RateLimiter>>,
    /// Exports streaming at once (each holds a database connection for its whole stream).
    pub concurrent_exports: usize,
    /// How long a request waits for an export slot before 503.
    pub export_wait: Duration,
    /// How long an export waits for its client to take the next chunk before it is ended.
    pub export_stall: Duration,
    /// Renders `/metrics` on the API's own address; `None` when they are served elsewhere.
    pub metrics: Option<MetricsRender>,
    /// Serving TLS: responses carry `Strict-Transport-Security`.
    pub hsts: bool,
    /// Serve the API reference page at `/api/v1/docs`.
    pub docs: bool,
    /// Read replicas for the read routes (their lag checks started by the caller).
    pub replicas: Option<Arc<Replicas>>,
}

/// The state of the HTTP API over a PostgreSQL store: the one wiring that `serve` and the
/// tests both use. Renders the OpenAPI document once. Fails only when the webhook HTTP
/// client cannot be built.
pub fn api_state(
    store: &PgStore,
    limiter: Arc<dyn RateLimiter>,
    wiring: Wiring,
) -> anyhow::Result<ApiState> {
    let keyring = Arc::new(wiring.keyring);
    let sender = ImmediateSender::new(
        keyring.clone(),
        wiring.webhook_timeout,
        wiring.webhook_policy.allow_private,
    )
    .context("the webhook HTTP client cannot be built")?;
    Ok(ApiState {
        ports: ports(store, wiring.replicas, limiter),
        trusted_proxies: wiring.trusted_proxies,
        customer_limiter: wiring.customer_limiter,
        keyring,
        webhook_policy: wiring.webhook_policy,
        webhook_ops: WebhookOps {
            sender: Arc::new(sender),
            test_limiter: wiring.test_limiter,
            customer_test_limiter: wiring.customer_test_limiter,
            retention: wiring.delivery_retention,
        },
        exports: Arc::new(ExportSlots::new(
            wiring.concurrent_exports,
            wiring.export_wait,
        )),
        export_stall: wiring.export_stall,
        metrics: wiring.metrics,
        hsts: wiring.hsts,
        docs: wiring.docs,
        readiness: Arc::default(),
        contract: posture_http::openapi::render().into(),
    })
}

/// The rate limiter the settings ask for: shared through Redis when `REDIS_URL` is set,
/// in this process otherwise. An unreachable Redis at start-up is not fatal: the limiter
/// counts in-process until Redis answers.
pub async fn limiter(limits: &RateLimitArgs) -> anyhow::Result<Arc<dyn RateLimiter>> {
    limiter_with(limits.policy(), limits.redis_url.as_deref()).await
}

/// A limiter of `policy`: shared through Redis when `redis_url` is set.
pub async fn limiter_with(
    policy: RatePolicy,
    redis_url: Option<&str>,
) -> anyhow::Result<Arc<dyn RateLimiter>> {
    match redis_url {
        None => {
            tracing::info!(
                limit = policy.limit,
                window_secs = policy.window_secs,
                "rate limits counted in this process (REDIS_URL is not set): per instance"
            );
            Ok(Arc::new(InProcessRateLimiter::new(policy)))
        }
        Some(url) => {
            let redis = RedisRateLimiter::new(url, policy).context("REDIS_URL")?;
            match redis.ping().await {
                Ok(()) => tracing::info!(
                    limit = policy.limit,
                    window_secs = policy.window_secs,
                    "rate limits shared by every instance through Redis"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "Redis is unreachable at start-up: counting per instance until it answers")
                }
            }
            Ok(Arc::new(redis))
        }
    }
}

/// The rustls server configuration of a PEM certificate chain and key.
pub fn tls_config(cert: &Path, key: &Path) -> anyhow::Result<rustls::ServerConfig> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| {
            format!(
                "reading the certificate chain {} (POSTURE_TLS_CERT)",
                cert.display()
            )
        })?;
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| {
        format!(
            "reading the private key {} (POSTURE_TLS_KEY)",
            key.display()
        )
    })?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .context("the TLS certificate and key do not match")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// How a server runs.
pub struct Serving {
    pub workers: usize,
    /// Each worker's own connections; `None`: the workers share the state's pool.
    pub worker_pools: Option<WorkerPools>,
    pub shutdown_timeout: Duration,
    /// Serve HTTPS with this configuration.
    pub tls: Option<rustls::ServerConfig>,
    /// Serve the customer console too.
    pub console: Option<ConsoleState>,
}

/// A running server.
pub struct Running {
    pub handle: ServerHandle,
    pub server: actix_web::dev::Server,
    pub local_addr: std::net::SocketAddr,
}

/// Starts serving `state` on `listener` (not yet awaited: the caller runs `server`).
pub fn start(listener: TcpListener, state: ApiState, serving: Serving) -> anyhow::Result<Running> {
    let local_addr = listener.local_addr()?;
    let shared = web::Data::new(state);
    let console = serving.console;
    let pools = serving.worker_pools.map(Arc::new);
    // Called once on each worker's thread, so each worker's pool is its own.
    let server = HttpServer::new(move || {
        let console = console.clone();
        let state = match pools.as_deref() {
            None => shared.clone(),
            Some(pools) => match ports::for_worker(&shared.ports, pools) {
                Ok(ports) => web::Data::new(ApiState {
                    ports,
                    ..(**shared).clone()
                }),
                Err(e) => {
                    tracing::warn!(error = %e, "a worker's pool could not be built: it shares the instance's");
                    shared.clone()
                }
            },
        };
        posture_http::app(state).configure(move |cfg| {
            if let Some(console) = console {
                posture_console::configure(cfg, console);
            }
        })
    })
    .workers(serving.workers)
    .shutdown_timeout(serving.shutdown_timeout.as_secs());
    let server = match serving.tls {
        Some(tls) => server.listen_rustls_0_23(listener, tls)?,
        None => server.listen(listener)?,
    }
    .run();
    Ok(Running {
        handle: server.handle(),
        server,
        local_addr,
    })
}

/// The metrics renderer: refreshes the gauges read on demand (pool, rate limiter), then
/// renders every series of the installed recorder.
pub fn metrics_render(
    handle: posture_config::metrics::PrometheusHandle,
    store: PgStore,
    replicas: Option<Arc<Replicas>>,
    limiter: Arc<dyn RateLimiter>,
) -> MetricsRender {
    Arc::new(move || {
        for (index, replica) in replicas.iter().flat_map(|r| r.status()).enumerate() {
            // Bounded by the configured replicas. Not answering counts as lagging forever.
            let replica_label = (index + 1).to_string();
            metrics::gauge!("posture_db_replica_usable", "replica" => replica_label.clone())
                .set(if replica.usable { 1.0 } else { 0.0 });
            metrics::gauge!("posture_db_replica_lag_seconds", "replica" => replica_label)
                .set(replica.lag_seconds.unwrap_or(f64::INFINITY));
        }
        let pool = store.status();
        metrics::gauge!("posture_db_pool_connections", "state" => "max").set(pool.max_size as f64);
        metrics::gauge!("posture_db_pool_connections", "state" => "open").set(pool.size as f64);
        metrics::gauge!("posture_db_pool_connections", "state" => "idle")
            .set(pool.available as f64);
        metrics::gauge!("posture_db_pool_waiting").set(pool.waiting as f64);
        let keys = store.key_cache_stats();
        metrics::counter!("posture_key_cache_lookups_total", "result" => "hit").absolute(keys.hits);
        metrics::counter!("posture_key_cache_lookups_total", "result" => "miss")
            .absolute(keys.misses);
        metrics::counter!("posture_key_cache_lookups_total", "result" => "unknown")
            .absolute(keys.unknown_hits);
        metrics::gauge!("posture_key_cache_live").set(if keys.live { 1.0 } else { 0.0 });
        let degraded = matches!(limiter.state(), LimiterState::Degraded { .. });
        metrics::gauge!("posture_rate_limiter_degraded").set(if degraded { 1.0 } else { 0.0 });
        handle.render()
    })
}

/// The console's state: its ports on `store`, the relying party, the sign-in limiter.
pub async fn console_state(
    args: &ServeArgs,
    store: &PgStore,
    keyring: Arc<Keyring>,
    request_limiter: Arc<dyn RateLimiter>,
) -> anyhow::Result<ConsoleState> {
    let sign_in_limiter = limiter_with(
        RatePolicy {
            limit: args.console.console_sign_in_limit,
            window_secs: SIGN_IN_WINDOW_SECS,
        },
        args.limits.redis_url.as_deref(),
    )
    .await?;
    Ok(ConsoleState {
        ports: ConsolePorts {
            keys: Arc::new(store.clone()),
            console: Arc::new(store.clone()),
            sign_in: Arc::new(
                OidcSignIn::new(EgressPolicy {
                    allow_private: false,
                    allowed_networks: args.console.sso_allowed_networks.0.clone(),
                })
                .context("building the OpenID Connect client")?,
            ),
            sign_in_limiter,
            request_limiter,
        },
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
    })
}

/// The read replicas of `POSTURE_DATABASE_READ_URL` (pools like the primary's), their lag
/// checks started; `None` without any.
fn replicas(
    args: &ServeArgs,
    primary: &posture_store_postgres::PgConfig,
) -> anyhow::Result<Option<Arc<Replicas>>> {
    let urls = args.replicas.urls();
    if urls.is_empty() {
        return Ok(None);
    }
    let policy = args.replicas.policy();
    let replicas = Arc::new(
        Replicas::new(primary, &urls, policy.clone()).context("POSTURE_DATABASE_READ_URL")?,
    );
    replicas.start_checks();
    tracing::info!(
        replicas = urls.len(),
        max_lag_ms = policy.max_lag.as_millis(),
        check_ms = policy.check_every.as_millis(),
        "the read routes use the read replicas that keep up"
    );
    Ok(Some(replicas))
}

/// Runs the API until SIGTERM or Ctrl-C.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut pg_config = args.database.pg_config();
    pg_config.statement_timeout =
        Some(Duration::from_millis(args.timeouts.db_statement_timeout_ms));
    pg_config.idle_in_transaction_timeout = Some(Duration::from_millis(
        args.timeouts.db_idle_in_transaction_timeout_ms,
    ));
    let store = PgStore::new(&pg_config).context("DATABASE_URL")?;
    store
        .ping()
        .await
        .context("cannot reach PostgreSQL at DATABASE_URL")?;
    let replicas = replicas(&args, &pg_config)?;
    let worker_replicas = replicas.clone();
    let pending = migrations::pending(&args.database.database_url)
        .await
        .context("reading the applied migrations failed")?;
    if !pending.is_empty() {
        tracing::warn!(pending = ?pending, "database migrations are pending: run `posture-api migrate`");
    }
    let listener = TcpListener::bind(args.bind)
        .with_context(|| format!("cannot listen on {} (POSTURE_BIND)", args.bind))?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls_config(cert, key)?),
        _ => None,
    };
    let workers = args.workers.map_or_else(
        || std::thread::available_parallelism().map_or(2, usize::from),
        usize::from,
    );
    let limiter = limiter(&args.limits).await?;
    store.start_key_cache();
    let render = metrics_render(
        posture_config::metrics::install_recorder()?,
        store.clone(),
        replicas.clone(),
        limiter.clone(),
    );
    let redis = args.limits.redis_url.as_deref();
    let test_limiter = limiter_with(TEST_RATE, redis).await?;
    let customer_test_limiter = limiter_with(TEST_CUSTOMER_RATE, redis).await?;
    let customer_limiter = Some(limiter_with(args.limits.customer_policy(), redis).await?);
    let state = api_state(
        &store,
        limiter,
        Wiring {
            trusted_proxies: args.limits.trusted_proxies.clone(),
            keyring: args.secrets.keyring()?,
            webhook_policy: args.webhooks.policy(),
            webhook_timeout: args.webhooks.timeout(),
            delivery_retention: args.webhooks.retention(),
            test_limiter,
            customer_test_limiter,
            customer_limiter,
            // Each export holds a connection for its whole stream: half the pool at most, so
            // exports never starve the other routes.
            concurrent_exports: (usize::from(args.database.db_pool_size) / 2)
                .clamp(1, posture_http::DEFAULT_CONCURRENT_EXPORTS),
            export_wait: Duration::from_secs(args.timeouts.export_wait_secs),
            export_stall: Duration::from_secs(args.timeouts.export_stall_secs),
            metrics: args.metrics_bind.is_none().then(|| render.clone()),
            hsts: tls.is_some(),
            docs: args.docs,
            replicas,
        },
    )?;
    let console = match args.console.enabled {
        true => Some(
            console_state(
                &args,
                &store,
                state.keyring.clone(),
                state.ports.limiter.clone(),
            )
            .await?,
        ),
        false => None,
    };
    let https = tls.is_some();
    let shutdown_timeout = Duration::from_secs(args.shutdown_timeout_secs);
    let running = start(
        listener,
        state,
        Serving {
            workers,
            worker_pools: Some(WorkerPools::split(
                store.clone(),
                worker_replicas,
                usize::from(args.database.db_pool_size),
                workers,
            )),
            shutdown_timeout,
            tls,
            console,
        },
    )?;
    tracing::info!(addr = %running.local_addr, workers, https, "posture-api listening");
    match args.metrics_bind {
        None => running.server.await.context("the HTTP server failed"),
        Some(bind) => {
            let metrics = HttpServer::new(move || posture_http::metrics_app(render.clone()))
                .workers(1)
                .bind(bind)
                .with_context(|| format!("cannot listen on {bind} (POSTURE_METRICS_BIND)"))?
                .run();
            tracing::info!(addr = %bind, "metrics served on their own address");
            let (api, metrics) = futures_util::future::join(running.server, metrics).await;
            api.context("the HTTP server failed")?;
            metrics.context("the metrics server failed")
        }
    }
}
