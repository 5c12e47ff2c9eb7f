//! The rate limiters `serve` builds: shared through Redis when `REDIS_URL` is set, in this
//! process otherwise.

use std::sync::Arc;

use anyhow::Context as _;
use posture_domain::{
    clock::Clock,
    rate_limit::{Places, RateLimiter, RatePolicy},
};
use posture_http::Budgets;
use posture_rate_limit::{InProcessPlaces, InProcessRateLimiter, RedisRateLimiter};

use crate::config::RateLimitArgs;

/// The rate limiter the settings ask for: shared through Redis when `REDIS_URL` is set,
/// in this process otherwise. An unreachable Redis at start-up is not fatal: the limiter
/// counts in-process until Redis answers.
pub async fn limiter(
    limits: &RateLimitArgs,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<Arc<dyn RateLimiter>> {
    limiter_with(
        "requests per key",
        limits.policy(),
        limits.redis_url.as_deref(),
        clock,
    )
    .await
}

/// A limiter of `policy`: shared through Redis when `redis_url` is set. `what` names the
/// limit in the start-up line (`requests per key`, `test deliveries per subscription`).
/// Counts in process run their windows on `clock`.
pub async fn limiter_with(
    what: &'static str,
    policy: RatePolicy,
    redis_url: Option<&str>,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<Arc<dyn RateLimiter>> {
    match redis_url {
        None => {
            tracing::info!(
                limit = what,
                max = policy.limit,
                window_secs = policy.window_secs,
                "rate limit counted in this process (REDIS_URL is not set): per instance"
            );
            Ok(Arc::new(InProcessRateLimiter::new(policy, clock)))
        }
        Some(url) => {
            let redis = RedisRateLimiter::new(url, policy, clock).context("REDIS_URL")?;
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

/// The customers' budgets the settings ask for (`token_policy`: each OAuth client's token
/// requests): each shared through Redis when `redis_url` is set (one budget over every
/// instance), in this process otherwise.
pub async fn budgets(
    redis_url: Option<&str>,
    token_policy: RatePolicy,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<Budgets> {
    let places: Arc<dyn Places> = match redis_url {
        None => Arc::new(InProcessPlaces::new()),
        // Any policy: this one counts places, not requests.
        Some(url) => Arc::new(
            RedisRateLimiter::new(url, posture_domain::triage::WRITE_RATE, clock.clone())
                .context("REDIS_URL")?,
        ),
    };
    Ok(Budgets {
        triage_writes: limiter_with(
            "triage writes per customer",
            posture_domain::triage::WRITE_RATE,
            redis_url,
            clock.clone(),
        )
        .await?,
        triage_bytes: limiter_with(
            "bytes triage writes add per customer",
            posture_domain::triage::BYTES_RATE,
            redis_url,
            clock.clone(),
        )
        .await?,
        scim_writes: limiter_with(
            "SCIM writes per customer",
            posture_domain::scim::WRITE_RATE,
            redis_url,
            clock.clone(),
        )
        .await?,
        token_requests: limiter_with(
            "token requests per OAuth client",
            token_policy,
            redis_url,
            clock.clone(),
        )
        .await?,
        places,
    })
}

/// The customers' budgets counted in this process, their windows on `clock` (tests).
pub fn budgets_in_process(clock: Arc<dyn Clock>) -> Budgets {
    let counted = |policy| -> Arc<dyn RateLimiter> {
        Arc::new(InProcessRateLimiter::new(policy, clock.clone()))
    };
    Budgets {
        triage_writes: counted(posture_domain::triage::WRITE_RATE),
        triage_bytes: counted(posture_domain::triage::BYTES_RATE),
        scim_writes: counted(posture_domain::scim::WRITE_RATE),
        token_requests: counted(posture_domain::oauth::TOKEN_RATE),
        places: Arc::new(InProcessPlaces::new()),
    }
}
