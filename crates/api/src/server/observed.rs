//! What `/metrics` shows of the API's own state: the gauges read on demand (pools, replicas,
//! key cache, rate limiter) refreshed before each rendering.

use std::sync::Arc;

use posture_domain::rate_limit::{LimiterState, RateLimiter};
use posture_http::MetricsRender;
use posture_store_postgres::{PgStore, Replicas};

/// The metrics renderer: refreshes the gauges read on demand (pool, rate limiter), then
/// renders every series of the installed recorder.
pub fn metrics_render(
    handle: posture_startup::metrics::PrometheusHandle,
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
        for (reader, lookups) in ["primary", "replica"].into_iter().zip(keys.versions) {
            metrics::counter!("posture_data_version_lookups_total", "reader" => reader, "result" => "hit")
                .absolute(lookups.hits);
            metrics::counter!("posture_data_version_lookups_total", "reader" => reader, "result" => "miss")
                .absolute(lookups.misses);
        }
        let degraded = matches!(limiter.state(), LimiterState::Degraded { .. });
        metrics::gauge!("posture_rate_limiter_degraded").set(if degraded { 1.0 } else { 0.0 });
        handle.render()
    })
}
