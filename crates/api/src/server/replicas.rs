//! The read replicas of `POSTURE_DATABASE_READ_URL`.

use std::sync::Arc;

use anyhow::Context as _;
use posture_store_postgres::Replicas;

use crate::config::ServeArgs;

/// The read replicas of `POSTURE_DATABASE_READ_URL` (pools like the primary's), their lag
/// checks started; `None` without any.
pub(super) fn replicas(
    args: &ServeArgs,
    primary: &posture_store_postgres::PgStore,
    config: &posture_store_postgres::PgConfig,
) -> anyhow::Result<Option<Arc<Replicas>>> {
    let urls = args.replicas.urls();
    if urls.is_empty() {
        return Ok(None);
    }
    let policy = args.replicas.policy();
    let replicas = Arc::new(
        Replicas::new(primary, config, &urls, policy.clone())
            .context("POSTURE_DATABASE_READ_URL")?,
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
