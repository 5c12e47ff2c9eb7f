//! The Prometheus exporter of both binaries. Series are recorded through the `metrics`
//! facade where they happen (`posture-http`, `posture-delivery`); this installs the
//! recorder that renders them.

use std::net::SocketAddr;

pub use metrics_exporter_prometheus::PrometheusHandle;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

use crate::ConfigError;

/// Histogram buckets of durations, in seconds.
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn builder() -> Result<PrometheusBuilder, ConfigError> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), DURATION_BUCKETS)
        .map_err(ConfigError::Metrics)
}

/// Installs the recorder; the handle renders the series (the API serves them itself).
pub fn install_recorder() -> Result<PrometheusHandle, ConfigError> {
    builder()?.install_recorder().map_err(ConfigError::Metrics)
}

/// Installs the recorder with its own HTTP listener serving `/metrics` (the worker).
pub fn install_with_listener(addr: SocketAddr) -> Result<(), ConfigError> {
    builder()?
        .with_http_listener(addr)
        .install()
        .map_err(ConfigError::Metrics)
}
