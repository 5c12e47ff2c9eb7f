//! The cost of one shared rate-limit check: the real Redis adapter, 16 concurrent callers.

use std::{sync::Arc, time::Instant};

use posture_domain::{
    KeyId,
    rate_limit::{RateBucket, RateLimiter, RatePolicy},
};
use posture_rate_limit::RedisRateLimiter;

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
            posture_domain::clock::system(),
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

/// Keys of the reset scenario, each a client obeying `Retry-After`.
const THROTTLED_KEYS: usize = 1_000;
/// Requests each client sends a second while allowed (a batch job catching up: the 1,000 of
/// a window go in 10 s, then it waits `Retry-After`).
const CLIENT_RATE: u32 = 100;

/// What the clients of [`THROTTLED_KEYS`] keys send each second over two windows, with
/// `check` deciding on each request (`(allowed, retry_after)`); returns the requests of the
/// busiest second of the second window and the mean of that window.
fn arrivals(
    policy: RatePolicy,
    mut check: impl FnMut(&RateBucket, u64) -> (bool, u64),
) -> (u64, f64) {
    let window = u64::from(policy.window_secs);
    // The run starts at a time with no particular relation to any window.
    let start = 1_800_000_123;
    let keys: Vec<RateBucket> = (0..THROTTLED_KEYS)
        .map(|_| RateBucket::Key(KeyId::generate()))
        .collect();
    let mut wake = vec![start; THROTTLED_KEYS];
    let mut per_second = Vec::new();
    for now in start..start + 2 * window {
        let mut sent = 0u64;
        for (i, key) in keys.iter().enumerate() {
            if wake[i] > now {
                continue;
            }
            for _ in 0..CLIENT_RATE {
                sent += 1;
                let (allowed, retry_after) = check(key, now);
                if !allowed {
                    wake[i] = now + retry_after;
                    break;
                }
            }
        }
        per_second.push(sent);
    }
    let second = &per_second[window as usize..];
    let peak = second.iter().copied().max().unwrap_or(0);
    let mean = second.iter().sum::<u64>() as f64 / second.len() as f64;
    (peak, mean)
}

/// The request rate in the busiest second after resets, 1,000 throttled keys: windows
/// aligned to the epoch for every key (what posture did before) against posture's limiter
/// (a phase per key), both driven second by second on a simulated clock.
pub fn reset_spread(figures: &mut Vec<Figure>) {
    let policy = RatePolicy::DEFAULT;
    // Before: one window for every key, starting at multiples of its length.
    let mut counts: std::collections::HashMap<RateBucket, (u64, u64)> = Default::default();
    let (aligned_peak, aligned_mean) = arrivals(policy, |key, now| {
        let (index, reset) = policy.window(now);
        let entry = counts.entry(key.clone()).or_insert((index, 0));
        if entry.0 != index {
            *entry = (index, 0);
        }
        entry.1 += 1;
        let d = policy.decide(entry.1, reset, now);
        (d.allowed, d.retry_after)
    });
    // Now: the in-process limiter itself (the Redis script computes the same windows).
    let limiter =
        posture_rate_limit::InProcessRateLimiter::new(policy, posture_domain::clock::system());
    let (phased_peak, phased_mean) = arrivals(policy, |key, now| {
        let d = limiter.check_at(key, now);
        (d.allowed, d.retry_after)
    });
    let name = |what: &str| {
        format!(
            "rate limits: {THROTTLED_KEYS} keys throttled ({} per {} s, clients sending \
             {CLIENT_RATE}/s and waiting Retry-After), {what}",
            policy.limit, policy.window_secs
        )
    };
    figures.push(
        Figure::measure(
            name("requests in the busiest second of a window"),
            phased_peak as f64,
            "req",
            true,
        )
        .against(
            aligned_peak as f64,
            "every key's window aligned (before)",
            None,
        ),
    );
    figures.push(
        Figure::measure(name("mean requests a second"), phased_mean, "req/s", true).against(
            aligned_mean,
            "every key's window aligned (before)",
            None,
        ),
    );
}
