//! The rate limiters `serve` builds: shared through Redis when `REDIS_URL` is set, in this
//! process otherwise.

use std::sync::Arc;

use anyhow::Context as _;
use posture_domain::rate_limit::{RateLimiter, RatePolicy};
use posture_rate_limit::InProcessRateLimiter;
use posture_rate_limit::RedisRateLimiter;

use crate::config::RateLimitArgs;

/// The rate limiter the settings ask for: shared through Redis when `REDIS_URL` is set,
/// in this process otherwise. An unreachable Redis at start-up is not fatal: the limiter
/// counts in-process until Redis answers.
pub async fn limiter(limits: &RateLimitArgs) -> anyhow::Result<Arc<dyn RateLimiter>> {
    limiter_with(
        "requests per key",
        limits.policy(),
        limits.redis_url.as_deref(),
    )
    .await
}

/// A limiter of `policy`: shared through Redis when `redis_url` is set. `what` names the
/// limit in the start-up line (`requests per key`, `test deliveries per subscription`).
pub async fn limiter_with(
    what: &'static str,
    policy: RatePolicy,
    redis_url: Option<&str>,
) -> anyhow::Result<Arc<dyn RateLimiter>> {
    match redis_url {
        None => {
            tracing::info!(
                limit = what,
                max = policy.limit,
                window_secs = policy.window_secs,
                "rate limit counted in this process (REDIS_URL is not set): per instance"
            );
            Ok(Arc::new(InProcessRateLimiter::new(policy)))
        }
        Some(url) => {
            let redis = RedisRateLimiter::new(url, policy).context("REDIS_URL")?;
            match redis.ping().await {
                Ok(()) => tracing::info!(
                    limit = what,
                    max = policy.limit,
                    window_secs = policy.window_secs,
                    "rate limit shared by every instance through Redis"
                ),
                Err(e) => {
                    tracing::warn!(limit = what, error = %e, "Redis is unreachable at start-up: counting per instance until it answers")
                }
            }
            Ok(Arc::new(redis))
        }
    }
}
