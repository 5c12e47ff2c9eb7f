//! `posture-api serve`: wires the PostgreSQL store into the HTTP API and runs it.

use std::{net::TcpListener, sync::Arc, time::Duration};

use actix_web::{HttpServer, dev::ServerHandle, web};
use anyhow::Context as _;
use posture_domain::rate_limit::{InProcessRateLimiter, RateLimiter};
use posture_http::{ApiState, Ports};
use posture_redis::RedisRateLimiter;
use posture_store_postgres::{PgStore, migrations};

use crate::config::{RateLimitArgs, ServeArgs};

/// The ports over a PostgreSQL store (every data port is the same store) and a rate limiter.
pub fn ports(store: &PgStore, limiter: Arc<dyn RateLimiter>) -> Ports {
    let store = Arc::new(store.clone());
    Ports {
        keys: store.clone(),
        tenants: store.clone(),
        identities: store.clone(),
        findings: store.clone(),
        recommendations: store.clone(),
        upr: store.clone(),
        webhooks: store.clone(),
        health: store,
        limiter,
    }
}

/// The rate limiter the settings ask for: shared through Redis when `REDIS_URL` is set,
/// in this process otherwise. An unreachable Redis at start-up is not fatal: the limiter
/// counts in-process until Redis answers.
pub async fn limiter(limits: &RateLimitArgs) -> anyhow::Result<Arc<dyn RateLimiter>> {
    let policy = limits.policy();
    match &limits.redis_url {
        None => {
            tracing::info!(
                limit = policy.limit,
                window_secs = policy.window_secs,
                "rate limits counted in this process (REDIS_URL is not set): per instance"
            );
            Ok(Arc::new(InProcessRateLimiter::new(policy)))
        }
        Some(url) => {
            let redis = RedisRateLimiter::new(url, policy)
                .map_err(|e| anyhow::anyhow!("REDIS_URL: {e}"))?;
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

/// A running server.
pub struct Running {
    pub handle: ServerHandle,
    pub server: actix_web::dev::Server,
    pub local_addr: std::net::SocketAddr,
}

/// Starts serving `state` on `listener` (not yet awaited: the caller runs `server`).
pub fn start(
    listener: TcpListener,
    state: ApiState,
    workers: usize,
    shutdown_timeout: Duration,
) -> anyhow::Result<Running> {
    let local_addr = listener.local_addr()?;
    let state = web::Data::new(state);
    let server = HttpServer::new(move || posture_http::app(state.clone()))
        .workers(workers)
        .shutdown_timeout(shutdown_timeout.as_secs())
        .listen(listener)?
        .run();
    Ok(Running {
        handle: server.handle(),
        server,
        local_addr,
    })
}

/// Runs the API until SIGTERM or Ctrl-C.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let store = PgStore::new(&args.database.pg_config())?;
    store
        .ping()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("cannot reach PostgreSQL at DATABASE_URL")?;
    let pending = migrations::pending(&args.database.database_url)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if !pending.is_empty() {
        tracing::warn!(pending = ?pending, "database migrations are pending: run `posture-api migrate`");
    }
    let listener = TcpListener::bind(args.bind)
        .with_context(|| format!("cannot listen on {} (POSTURE_BIND)", args.bind))?;
    let workers = args.workers.map_or_else(
        || std::thread::available_parallelism().map_or(2, usize::from),
        usize::from,
    );
    let state = ApiState {
        ports: ports(&store, limiter(&args.limits).await?),
        trusted_proxies: args.limits.trusted_proxies.clone(),
        keyring: Arc::new(args.secrets.keyring()?),
        webhook_policy: args.webhooks.policy(),
        exports: Arc::new(tokio::sync::Semaphore::new(
            posture_http::DEFAULT_CONCURRENT_EXPORTS,
        )),
    };
    let running = start(
        listener,
        state,
        workers,
        Duration::from_secs(args.shutdown_timeout_secs),
    )?;
    tracing::info!(addr = %running.local_addr, workers, "posture-api listening");
    running.server.await.context("the HTTP server failed")
}
