//! The cost of one shared rate-limit check: the real Redis adapter, 16 concurrent callers.

use std::{sync::Arc, time::Instant};

use posture_domain::{
    KeyId,
    rate_limit::{RateBucket, RateLimiter, RatePolicy},
};
use posture_redis::RedisRateLimiter;

use super::Figure;

const CHECKS_PER_CALLER: usize = 2_000;

pub fn redis_check_latency(
    url: &str,
    callers: usize,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let limiter = Arc::new(
        RedisRateLimiter::new(
            url,
            RatePolicy {
                limit: 10_000_000,
                window_secs: 900,
            },
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?,
    );
    let (mut latencies, seconds) = runtime.block_on(async {
        let started = Instant::now();
        let tasks: Vec<_> = (0..callers)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move {
                    let bucket = RateBucket::Key(KeyId::generate());
                    let mut times = Vec::with_capacity(CHECKS_PER_CALLER);
                    for _ in 0..CHECKS_PER_CALLER {
                        let t = Instant::now();
                        let _ = limiter.check(&bucket).await;
                        times.push(t.elapsed().as_secs_f64() * 1000.0);
                    }
                    times
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap_or_default());
        }
        (all, started.elapsed().as_secs_f64())
    });
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize];
    figures.push(Figure::measure(
        format!("Redis rate-limit check, {callers} concurrent callers: p50"),
        at(0.5),
        "ms",
        true,
    ));
    figures.push(Figure::measure(
        format!("Redis rate-limit check, {callers} concurrent callers: p99"),
        at(0.99),
        "ms",
        true,
    ));
    figures.push(Figure::measure(
        format!("Redis rate-limit checks, {callers} concurrent callers: throughput"),
        latencies.len() as f64 / seconds,
        "checks/s",
        false,
    ));
    Ok(())
}
