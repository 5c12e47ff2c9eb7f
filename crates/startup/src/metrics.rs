//! The Prometheus exporter of both binaries. Series are recorded through the `metrics`
//! facade where they happen (`posture-http`, `posture-delivery`); this installs the
//! recorder that renders them.

use std::{net::SocketAddr, time::Duration};

pub use metrics_exporter_prometheus::PrometheusHandle;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

use crate::args::ConfigError;

/// Histogram buckets of durations, in seconds.
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn builder() -> Result<PrometheusBuilder, ConfigError> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), DURATION_BUCKETS)
        .map_err(ConfigError::Metrics)
}

/// How often the API folds recorded histogram samples into their buckets (the interval
/// the exporter's own listener uses).
pub const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Installs the recorder; the handle renders the series (the API serves them itself).
///
/// A histogram keeps every sample recorded since it was last folded into its buckets, which
/// rendering or upkeep does. Without upkeep an API nobody scrapes held 8 bytes and more per
/// request (a one-hour soak: +34 MiB on the busier instance), so the upkeep is started here
/// on the current tokio runtime, every [`UPKEEP_EVERY`].
pub fn install_recorder() -> Result<PrometheusHandle, ConfigError> {
    let handle = builder()?
        .install_recorder()
        .map_err(ConfigError::Metrics)?;
    spawn_upkeep(handle.clone(), UPKEEP_EVERY);
    Ok(handle)
}

/// Runs the recorder's upkeep every `every`, for as long as the runtime runs.
pub fn spawn_upkeep(handle: PrometheusHandle, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            handle.run_upkeep();
        }
    })
}

/// Installs the recorder with its own HTTP listener serving `/metrics` (the worker).
pub fn install_with_listener(addr: SocketAddr) -> Result<(), ConfigError> {
    builder()?
        .with_http_listener(addr)
        .install()
        .map_err(ConfigError::Metrics)
}
