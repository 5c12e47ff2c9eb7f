//! The Redis rate limiter against a real Redis.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::time::Duration;

use posture_domain::{
    KeyId,
    rate_limit::{LimiterState, RateBucket, RateLimiter, RatePolicy},
};
use posture_rate_limit::RedisRateLimiter;
use posture_test_support::{redis_url, servers::RedisServer, waits::wait_for};

/// Epoch seconds now, as Redis's windows count them.
fn epoch_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

const POLICY: RatePolicy = RatePolicy {
    limit: 5,
    window_secs: 900,
};

fn key() -> RateBucket {
    RateBucket::Key(KeyId::generate())
}

#[tokio::test]
async fn two_limiters_on_one_redis_count_one_key_together() {
    let a = RedisRateLimiter::new(&redis_url(), POLICY, posture_domain::clock::system()).unwrap();
    let b = RedisRateLimiter::new(&redis_url(), POLICY, posture_domain::clock::system()).unwrap();
    let bucket = key();
    let mut remaining = Vec::new();
    for i in 0..5 {
        let limiter = if i % 2 == 0 { &a } else { &b };
        remaining.push(limiter.check(&bucket).await.unwrap().remaining);
    }
    assert_eq!(remaining, vec![4, 3, 2, 1, 0]);
    let refused = b.check(&bucket).await.unwrap();
    assert!(!refused.allowed);
    assert_eq!(a.state(), LimiterState::Shared);
}

/// A budget counted in bytes, spent by two instances: one budget, not two; a spend that
/// does not fit is refused whole and costs nothing, so a smaller one still fits.
#[tokio::test]
async fn a_byte_budget_is_spent_once_over_every_instance() {
    let bytes = RatePolicy {
        limit: 1000,
        window_secs: 900,
    };
    let a = RedisRateLimiter::new(&redis_url(), bytes, posture_domain::clock::system()).unwrap();
    let b = RedisRateLimiter::new(&redis_url(), bytes, posture_domain::clock::system()).unwrap();
    let bucket = RateBucket::CustomerTriageBytes(posture_domain::CustomerId::generate());
    let first = a.spend(&bucket, 600).await.unwrap();
    assert!(first.allowed);
    assert_eq!(first.remaining, 400);
    let over = b.spend(&bucket, 401).await.unwrap();
    assert!(
        !over.allowed,
        "the other instance sees what the first spent"
    );
    assert_eq!(over.remaining, 400, "a refused spend costs nothing");
    assert!(over.retry_after >= 1);
    let rest = b.spend(&bucket, 400).await.unwrap();
    assert!(rest.allowed);
    assert_eq!(rest.remaining, 0);
    assert!(!a.spend(&bucket, 1).await.unwrap().allowed);
}

/// A customer's places are one count over every instance; a place its holder stops
/// renewing (its instance died) lapses with its lease, and a renewed one does not.
#[tokio::test]
async fn places_are_counted_over_every_instance_and_lapse_unrenewed() {
    use posture_domain::rate_limit::{Place, PlaceKind, Places};
    let lease = Duration::from_millis(600);
    let a = RedisRateLimiter::new(&redis_url(), POLICY, posture_domain::clock::system())
        .unwrap()
        .with_place_lease(lease);
    let b = RedisRateLimiter::new(&redis_url(), POLICY, posture_domain::clock::system())
        .unwrap()
        .with_place_lease(lease);
    let customer = posture_domain::CustomerId::generate();
    let kept = Place::new(PlaceKind::Waiting, customer);
    let lapsing = Place::new(PlaceKind::Waiting, customer);
    assert!(a.take(&kept, 2).await.unwrap());
    assert!(b.take(&lapsing, 2).await.unwrap());
    let third = Place::new(PlaceKind::Waiting, customer);
    assert!(
        !a.take(&third, 2).await.unwrap(),
        "two held, over both instances"
    );
    assert!(
        a.take(&Place::new(PlaceKind::Export, customer), 1)
            .await
            .unwrap(),
        "another kind counts apart"
    );
    // `kept` is renewed, `lapsing` is not: within two leases only `lapsing` lapses.
    wait_for(
        "the unrenewed place to lapse",
        Duration::from_secs(5),
        || async {
            a.keep(&kept).await.unwrap();
            b.take(&third, 2).await.unwrap().then_some(())
        },
    )
    .await;
    assert!(
        !a.take(&Place::new(PlaceKind::Waiting, customer), 2)
            .await
            .unwrap(),
        "the renewed place is still held"
    );
    a.give_back(&kept).await.unwrap();
    assert!(
        b.take(&Place::new(PlaceKind::Waiting, customer), 2)
            .await
            .unwrap()
    );
}

/// A holder Redis lost (Redis restarted empty) while its request runs is counted again at
/// its next renewal: the customer's limit holds across the restart.
#[tokio::test]
async fn a_place_redis_lost_is_counted_again_when_renewed() {
    use posture_domain::rate_limit::{Place, PlaceKind, Places};
    let a = RedisRateLimiter::new(&redis_url(), POLICY, posture_domain::clock::system()).unwrap();
    let customer = posture_domain::CustomerId::generate();
    let held = Place::new(PlaceKind::Export, customer);
    assert!(a.take(&held, 1).await.unwrap());
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: i64 = redis::cmd("DEL")
        .arg(format!("posture:places:{{export:{customer}}}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    a.keep(&held).await.unwrap();
    assert!(
        !a.take(&Place::new(PlaceKind::Export, customer), 1)
            .await
            .unwrap(),
        "the renewed holder holds its place again"
    );
    a.give_back(&held).await.unwrap();
    assert!(
        a.take(&Place::new(PlaceKind::Export, customer), 1)
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn the_budget_of_a_bucket_is_shared_and_read_without_counting() {
    let a = RedisRateLimiter::new(&redis_url(), POLICY, posture_domain::clock::system()).unwrap();
    let b = RedisRateLimiter::new(&redis_url(), POLICY, posture_domain::clock::system()).unwrap();
    // A fresh name: the test Redis outlives runs within one window.
    let bucket = RateBucket::Address(format!("test-{}", KeyId::generate()));
    for _ in 0..5 {
        assert!(b.peek(&bucket).await.unwrap().allowed);
        a.check(&bucket).await.unwrap();
    }
    assert!(
        !b.peek(&bucket).await.unwrap().allowed,
        "spent on the other instance"
    );
    assert!(!a.peek(&bucket).await.unwrap().allowed);
    assert_eq!(
        a.check(&bucket).await.unwrap().remaining,
        0,
        "reading the budget counted nothing"
    );
}

#[tokio::test]
async fn a_refused_request_says_when_the_window_resets() {
    let limiter =
        RedisRateLimiter::new(&redis_url(), POLICY, posture_domain::clock::system()).unwrap();
    let bucket = key();
    for _ in 0..5 {
        assert!(limiter.check(&bucket).await.unwrap().allowed);
    }
    let refused = limiter.check(&bucket).await.unwrap();
    let now = epoch_secs();
    assert!(!refused.allowed);
    assert!(
        refused.reset_at > now && refused.reset_at <= now + 900,
        "{refused:?}"
    );
    assert_eq!(
        (refused.reset_at + POLICY.phase(&bucket)) % 900,
        0,
        "the bucket's windows end at its phase before multiples of the window, as the \
         in-process limiter's do"
    );
    // (Redis's clock decided; this process read its own a moment later.)
    assert!(
        [now, now - 1]
            .map(|t| POLICY.window_of(&bucket, t).1)
            .contains(&refused.reset_at),
        "Redis and this process agree on the window"
    );
    assert!(refused.retry_after >= 1 && refused.retry_after.abs_diff(refused.reset_at - now) <= 1);
}

#[tokio::test]
async fn requests_pass_again_after_the_window_resets() {
    let policy = RatePolicy {
        limit: 2,
        window_secs: 2,
    };
    let limiter =
        RedisRateLimiter::new(&redis_url(), policy, posture_domain::clock::system()).unwrap();
    let bucket = key();
    let refused = loop {
        let decision = limiter.check(&bucket).await.unwrap();
        if !decision.allowed {
            break decision;
        }
    };
    // Redis's clock ends the window: wait for that, not for a guess of it.
    let bound = Duration::from_secs(refused.retry_after + 3);
    wait_for("the next window", bound, || async {
        limiter.check(&bucket).await.unwrap().allowed.then_some(())
    })
    .await;
}

#[tokio::test]
async fn redis_down_never_fails_a_check_and_sharing_resumes_when_it_is_back() {
    let mut redis = RedisServer::start().unwrap();
    let limiter =
        RedisRateLimiter::new(&redis.url(), POLICY, posture_domain::clock::system()).unwrap();
    let bucket = key();
    assert_eq!(limiter.check(&bucket).await.unwrap().remaining, 4);
    assert_eq!(limiter.state(), LimiterState::Shared);

    redis.stop();
    for _ in 0..3 {
        assert!(
            limiter.check(&bucket).await.is_ok(),
            "checks keep answering"
        );
    }
    assert!(matches!(limiter.state(), LimiterState::Degraded { .. }));

    redis.restart().unwrap();
    // Checks count in the process until the limiter's next probe finds Redis again. The
    // restarted Redis is empty: counting starts again there, shared.
    counts_in_redis_again(&limiter, &bucket, &redis).await;
}

/// Checks `bucket` until `limiter` shares again (its next probe answered), and that the
/// check which did counted in `redis`, shared with another limiter. (A probe that timed out
/// may have counted there too, so the count is read, not assumed to be the first.)
async fn counts_in_redis_again(
    limiter: &RedisRateLimiter,
    bucket: &RateBucket,
    redis: &RedisServer,
) {
    let decision = wait_for("the limiter to share", Duration::from_secs(10), || async {
        let decision = limiter.check(bucket).await.unwrap();
        (limiter.state() == LimiterState::Shared).then_some(decision)
    })
    .await;
    assert!(decision.remaining < POLICY.limit, "{decision:?}");
    let other =
        RedisRateLimiter::new(&redis.url(), POLICY, posture_domain::clock::system()).unwrap();
    assert_eq!(
        other.check(bucket).await.unwrap().remaining,
        decision.remaining.saturating_sub(1)
    );
}

#[tokio::test]
async fn counters_are_named_by_the_key_id() {
    let limiter =
        RedisRateLimiter::new(&redis_url(), POLICY, posture_domain::clock::system()).unwrap();
    let id = KeyId::generate();
    limiter.check(&RateBucket::Key(id)).await.unwrap();
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("posture:rl:{{key:{id}}}:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
}

/// A TCP relay to `upstream` that waits `delay` before relaying each new connection: a
/// Redis whose connection takes longer to make than a check may wait (a distant one over
/// TLS, say).
async fn slow_relay(upstream: String, delay: Duration) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                if let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    format!("redis://{address}")
}

#[tokio::test]
async fn a_connection_slower_to_make_than_a_check_waits_is_made_all_the_same_and_used() {
    let redis = RedisServer::start().unwrap();
    let upstream = redis.url().trim_start_matches("redis://").to_owned();
    // Longer than a check waits for Redis (250 ms) and than redis-rs's own default for making
    // a connection (1 s), well within the time posture gives it (5 s).
    let url = slow_relay(upstream, Duration::from_millis(1500)).await;
    let limiter = RedisRateLimiter::new(&url, POLICY, posture_domain::clock::system()).unwrap();
    let bucket = key();
    let first = limiter.check(&bucket).await.unwrap();
    assert!(first.allowed);
    assert!(
        matches!(limiter.state(), LimiterState::Degraded { .. }),
        "the first check did not wait for the connection"
    );
    // The connection was made meanwhile: the next retry (at most a second later) uses it.
    // Had the attempt been cut off with the check, every retry would start a new one and
    // time out the same way. (The in-process counts stay in the process.)
    counts_in_redis_again(&limiter, &bucket, &redis).await;
}
