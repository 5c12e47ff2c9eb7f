//! `posture-api serve`: wires the PostgreSQL store into the HTTP API and runs it.

use std::{net::TcpListener, sync::Arc, time::Duration};

use actix_web::{HttpServer, dev::ServerHandle, web};
use anyhow::Context as _;
use posture_console::ConsoleState;
use posture_delivery::ImmediateSender;
use posture_domain::{
    clock::Clock,
    delivery::{TEST_CUSTOMER_RATE, TEST_RATE},
    rate_limit::RateLimiter,
    secrets::Keyring,
    webhook::TargetPolicy,
};
use posture_http::event_waits::EventWaits;
use posture_http::{ApiState, ExportSlots, MetricsRender, WebhookOps};
use posture_store_postgres::{PgStore, Replicas, migrations};

mod console;
mod limiters;
mod observed;
mod ports;
mod replicas;
mod tls;

pub use console::{console_ports, console_state};
pub use limiters::{budgets, budgets_in_process, limiter, limiter_with};
pub use observed::metrics_render;
pub use ports::{WorkerPools, ports};
pub use tls::tls_config;

use crate::config::ServeArgs;

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
    /// What each customer may spend (triage writes and bytes, SCIM writes, places).
    pub budgets: posture_http::Budgets,
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
        store.clock(),
    )
    .context("the webhook HTTP client cannot be built")?;
    Ok(ApiState {
        ports: ports(store, wiring.replicas, limiter),
        trusted_proxies: wiring.trusted_proxies,
        customer_limiter: wiring.customer_limiter,
        budgets: wiring.budgets.clone(),
        keyring,
        webhook_policy: wiring.webhook_policy,
        webhook_ops: WebhookOps {
            sender: Arc::new(sender),
            test_limiter: wiring.test_limiter,
            customer_test_limiter: wiring.customer_test_limiter,
            retention: wiring.delivery_retention,
        },
        event_waits: EventWaits::new(
            Arc::new(store.clone()),
            posture_http::event_waits::DEFAULT_MAX_WAITING,
            wiring.budgets.places.clone(),
        ),
        exports: Arc::new(ExportSlots::new(
            wiring.concurrent_exports,
            wiring.export_wait,
            wiring.budgets.places.clone(),
        )),
        export_stall: wiring.export_stall,
        metrics: wiring.metrics,
        hsts: wiring.hsts,
        docs: wiring.docs,
        readiness: Arc::default(),
        clock: store.clock(),
        public_url: None,
        token_lifetime: posture_domain::oauth::DEFAULT_TOKEN_LIFETIME,
        contract: posture_http::openapi::render().into(),
    })
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

/// Runs the API until SIGTERM or Ctrl-C.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // The process's one clock: the store, the limiters and the budgets decide on it.
    let clock = posture_domain::clock::system();
    let (store, pg_config) = open_store(&args, clock.clone()).await?;
    let replicas = replicas::replicas(&args, &store, &pg_config)?;
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
    let limiter = limiter(&args.limits, clock.clone()).await?;
    store.start_key_cache();
    let render = metrics_render(
        posture_startup::metrics::install_recorder()?,
        store.clone(),
        replicas.clone(),
        limiter.clone(),
    );
    let wiring = wiring(&args, &render, tls.is_some(), replicas.clone(), clock).await?;
    let mut state = api_state(&store, limiter, wiring)?;
    state.public_url = args.console.public_url.clone();
    state.token_lifetime = chrono::Duration::minutes(args.token_lifetime_minutes);
    state.event_waits = state
        .event_waits
        .with_max_wait(Duration::from_secs(args.event_max_wait_secs))
        .with_stream_for(Duration::from_secs(args.event_stream_secs));
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
    let waits = state.event_waits.clone();
    let running = start(
        listener,
        state,
        Serving {
            workers,
            worker_pools: Some(WorkerPools::split(
                store.clone(),
                replicas,
                usize::from(args.database.db_pool_size),
                workers,
            )),
            shutdown_timeout: Duration::from_secs(args.shutdown_timeout_secs),
            tls,
            console,
        },
    )?;
    tracing::info!(addr = %running.local_addr, workers, https, "posture-api listening");
    // actix-web stops on the same signals and waits for the requests in flight: those
    // waiting on the events feed answer at once instead of holding the shutdown.
    tokio::spawn(async move {
        stop_signal().await;
        waits.stop_waiting();
    });
    run_until_stopped(running, args.metrics_bind, render).await
}

/// The store on `DATABASE_URL` with the API's session timeouts, reachable; warns when
/// migrations are pending.
async fn open_store(
    args: &ServeArgs,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<(PgStore, posture_store_postgres::PgConfig)> {
    let mut pg_config = args.database.pg_config(clock)?;
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
    store.warn_unless_messages_in_english().await;
    let pending = migrations::pending(args.database.url()?)
        .await
        .context("reading the applied migrations failed")?;
    if !pending.is_empty() {
        tracing::warn!(pending = ?pending, "database migrations are pending: run `posture-api migrate`");
    }
    Ok((store, pg_config))
}

/// The API's wiring from the settings: its limiters, webhook and export rules, metrics.
async fn wiring(
    args: &ServeArgs,
    render: &MetricsRender,
    https: bool,
    replicas: Option<Arc<Replicas>>,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<Wiring> {
    let redis = args.limits.redis_url.as_deref();
    Ok(Wiring {
        trusted_proxies: args.limits.trusted_proxies.clone(),
        keyring: args.secrets.keyring()?,
        webhook_policy: args.webhooks.policy(),
        webhook_timeout: args.webhooks.timeout(),
        delivery_retention: args.webhooks.retention(),
        test_limiter: limiter_with(
            "test deliveries per subscription",
            TEST_RATE,
            redis,
            clock.clone(),
        )
        .await?,
        customer_test_limiter: limiter_with(
            "test deliveries per customer",
            TEST_CUSTOMER_RATE,
            redis,
            clock.clone(),
        )
        .await?,
        budgets: budgets(redis, args.limits.token_policy(), clock.clone()).await?,
        customer_limiter: Some(
            limiter_with(
                "requests per customer",
                args.limits.customer_policy(),
                redis,
                clock,
            )
            .await?,
        ),
        // Each export holds a connection for its whole stream: half the pool at most, so
        // exports never starve the other routes.
        concurrent_exports: (usize::from(args.database.db_pool_size) / 2)
            .clamp(1, posture_http::DEFAULT_CONCURRENT_EXPORTS),
        export_wait: Duration::from_secs(args.timeouts.export_wait_secs),
        export_stall: Duration::from_secs(args.timeouts.export_stall_secs),
        metrics: args.metrics_bind.is_none().then(|| render.clone()),
        hsts: https,
        docs: args.docs,
        replicas,
    })
}

/// SIGTERM or Ctrl-C (SIGINT), whichever comes first.
async fn stop_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Serves until stopped, with `/metrics` on its own address when `metrics_bind` is set.
async fn run_until_stopped(
    running: Running,
    metrics_bind: Option<std::net::SocketAddr>,
    render: MetricsRender,
) -> anyhow::Result<()> {
    match metrics_bind {
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
