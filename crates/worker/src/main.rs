//! `posture-worker`: delivers webhook events from the outbox until stopped
//! (`--once`: delivers what is due now, then exits).

use std::{io::Write as _, process::ExitCode, sync::Arc, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use posture_delivery::{Worker, WorkerConfig};
use posture_domain::{delivery::RetryPolicy, fair_share::FairShare};
use posture_startup::{DatabaseArgs, LogArgs, SecretArgs, WebhookArgs, telemetry};
use posture_store_postgres::PgStore;

/// Delivers posture's signed webhook events.
#[derive(Parser, Debug)]
#[command(name = "posture-worker", version, about)]
struct Cli {
    #[command(flatten)]
    database: DatabaseArgs,
    #[command(flatten)]
    secrets: SecretArgs,
    #[command(flatten)]
    webhooks: WebhookArgs,
    /// Deliver what is due now, then exit (prints how many deliveries were attempted).
    #[arg(long)]
    once: bool,
    /// Print one JSON object on stdout instead of text (`{"attempted": n}` with `--once`;
    /// nothing while delivering until stopped).
    #[arg(long)]
    json: bool,
    /// Delay before the first retry; later ones grow 4x each (capped at 12 h), with jitter.
    #[arg(long, env = "POSTURE_WEBHOOK_RETRY_BASE_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    retry_base_secs: u64,
    /// Attempts before a delivery is failed (the defaults span about 23 hours).
    #[arg(long, env = "POSTURE_WEBHOOK_MAX_ATTEMPTS", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=50))]
    max_attempts: u32,
    /// Days every attempt of a subscription may fail before the worker disables it
    /// (`disabledReason: failing`; the customer re-enables it).
    #[arg(long, env = "POSTURE_WEBHOOK_DISABLE_AFTER_DAYS", default_value_t = posture_domain::webhook::DEFAULT_DISABLE_AFTER_DAYS, value_parser = clap::value_parser!(u32).range(1..=90))]
    disable_after_days: u32,
    /// Deliveries sent at once to receivers that answer promptly (the prompt lane).
    #[arg(long, env = "POSTURE_WORKER_CONCURRENCY", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    concurrency: u32,
    /// Deliveries sent at once to receivers recognised slow (the slow lane; default: a
    /// quarter of the concurrency, at least 1).
    #[arg(long, env = "POSTURE_WORKER_SLOW_CONCURRENCY", value_parser = clap::value_parser!(u32).range(1..=1024))]
    slow_concurrency: Option<u32>,
    /// Deliveries of one subscription in flight at once, over every worker (set the same on
    /// every worker).
    #[arg(long, env = "POSTURE_WEBHOOK_SUBSCRIPTION_IN_FLIGHT", default_value_t = posture_domain::fair_share::DEFAULT_PER_SUBSCRIPTION, value_parser = clap::value_parser!(u32).range(1..=256))]
    subscription_in_flight: u32,
    /// The average latency (ms) from which a subscription is served on the slow lane; below
    /// the timeout (default: 2,000, or half the timeout when that is shorter; set the same
    /// on every worker).
    #[arg(long, env = "POSTURE_WEBHOOK_SLOW_MS", value_parser = clap::value_parser!(u64).range(1..=600_000))]
    slow_ms: Option<u64>,
    /// Seconds a claim lasts (a crashed worker's deliveries are retried after it); must exceed
    /// the timeout.
    #[arg(long, env = "POSTURE_WORKER_LEASE_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(2..=3600))]
    lease_secs: u64,
    /// Longest sleep between looks at the queue when no notification arrives.
    #[arg(long, env = "POSTURE_WORKER_POLL_SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=300))]
    poll_secs: u64,
    /// Seconds between measures of every customer's stored data for the usage gauges
    /// (`posture_customer_usage_*`; each reads every row, one worker at a time); 0: never.
    #[arg(long, env = "POSTURE_WORKER_USAGE_SECS", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(0..=604_800))]
    usage_secs: u64,
    /// Serve Prometheus metrics (`/metrics`) on this address; off when unset.
    #[arg(long, env = "POSTURE_METRICS_BIND")]
    metrics_bind: Option<std::net::SocketAddr>,
    #[command(flatten)]
    log: LogArgs,
}

/// mimalloc, as in posture-api: each delivery renders, signs and sends a body of up to
/// ~100 findings and reads their rows, many short-lived buffers; one allocator for both
/// binaries keeps their memory behaviour alike (the worker was not measured on its own).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "worker".to_owned(), |h| h.trim().to_owned());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}-{}", std::process::id(), &suffix[..6])
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    if cli.lease_secs <= cli.webhooks.timeout_secs {
        anyhow::bail!(
            "POSTURE_WORKER_LEASE_SECS ({}) must exceed POSTURE_WEBHOOK_TIMEOUT_SECS ({})",
            cli.lease_secs,
            cli.webhooks.timeout_secs
        );
    }
    let slow_after = match cli.slow_ms.map(Duration::from_millis) {
        Some(slow) if slow >= cli.webhooks.timeout() => anyhow::bail!(
            "POSTURE_WEBHOOK_SLOW_MS ({} ms) must be below POSTURE_WEBHOOK_TIMEOUT_SECS ({} s)",
            slow.as_millis(),
            cli.webhooks.timeout_secs
        ),
        Some(slow) => slow,
        None => posture_domain::fair_share::DEFAULT_SLOW_AFTER.min(cli.webhooks.timeout() / 2),
    };
    // The process's one clock: the store's decisions and the worker's times read it.
    let clock = posture_domain::clock::system();
    let store =
        Arc::new(PgStore::new(&cli.database.pg_config(clock.clone())?).context("DATABASE_URL")?);
    store
        .ping()
        .await
        .context("cannot reach PostgreSQL at DATABASE_URL")?;
    store.warn_unless_messages_in_english().await;
    let config = WorkerConfig {
        id: worker_id(),
        concurrency: cli.concurrency as usize,
        slow_concurrency: cli
            .slow_concurrency
            .map_or((cli.concurrency as usize / 4).max(1), |n| n as usize),
        share: FairShare {
            per_subscription: cli.subscription_in_flight,
            slow_after,
        },
        lease: Duration::from_secs(cli.lease_secs),
        poll_interval: Duration::from_secs(cli.poll_secs),
        retry: RetryPolicy {
            base: Duration::from_secs(cli.retry_base_secs),
            max_attempts: cli.max_attempts,
        },
        timeout: cli.webhooks.timeout(),
        retention: cli.webhooks.retention(),
        disable_after: chrono::Duration::days(i64::from(cli.disable_after_days)),
        allow_private: cli.webhooks.policy().allow_private,
        clock,
    };
    let mut worker = Worker::new(
        store.clone(),
        store.clone(),
        Arc::new(cli.secrets.keyring()?),
        config,
    )
    .context("the webhook HTTP client cannot be built")?
    .with_events(store.clone(), cli.webhooks.event_retention())
    .with_audit(store.clone(), cli.webhooks.audit_retention())
    .with_idempotency_keys(store.clone());
    if cli.usage_secs > 0 {
        worker = worker.with_usage(store.clone(), Duration::from_secs(cli.usage_secs));
    }
    let worker = Arc::new(worker.with_pass_statistics(store));
    if let (Some(bind), false) = (cli.metrics_bind, cli.once) {
        posture_startup::metrics::install_with_listener(bind)
            .with_context(|| format!("cannot serve metrics on {bind} (POSTURE_METRICS_BIND)"))?;
        tracing::info!(addr = %bind, "metrics served");
    }
    if cli.once {
        let attempted = worker.drain().await.context("delivering failed")?;
        let mut out = std::io::stdout().lock();
        if cli.json {
            writeln!(out, "{}", serde_json::json!({ "attempted": attempted }))?;
        } else {
            writeln!(out, "{attempted} deliveries attempted")?;
        }
        return Ok(());
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("stopping: finishing in-flight deliveries, releasing the rest");
        let _ = stop.send(true);
    });
    worker.run(stopped).await;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(&cli.log);
    let _ = rustls::crypto::ring::default_provider().install_default();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
