//! Rate limits (docs/api.md): per-key fixed windows shared by every instance, with headers on
//! every response.

use std::{
    process::{Child, Command, Stdio},
    sync::Arc,
    time::Duration,
};

use posture_domain::{
    Scope,
    clock::{ManualClock, system},
    rate_limit::{RateLimiter, RatePolicy},
};
use posture_http::TrustedProxies;
use posture_rate_limit::{InProcessRateLimiter, RedisRateLimiter};
use posture_test_support::{TestDb, redis_url, servers::RedisServer, waits::wait_for};
use reqwest::{Response, StatusCode};

use crate::support::{TestApp, assert_error, client};

/// Epoch seconds now, as the limiters' windows count them.
fn epoch_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn in_process(limit: u32, window_secs: u32) -> impl FnOnce() -> Arc<dyn RateLimiter> {
    move || {
        Arc::new(crate::harness::held_limiter(RatePolicy {
            limit,
            window_secs,
        }))
    }
}

fn header(response: &Response, name: &str) -> u64 {
    response.headers()[name].to_str().unwrap().parse().unwrap()
}

/// Checks the three X-RateLimit headers and the draft fields; returns (remaining, reset).
fn assert_rate_headers(response: &Response, limit: u64, window: u64) -> (u64, u64) {
    assert_eq!(
        header(response, "x-ratelimit-limit"),
        limit,
        "{}",
        response.url()
    );
    let remaining = header(response, "x-ratelimit-remaining");
    let reset = header(response, "x-ratelimit-reset");
    let now = epoch_secs();
    assert!(
        reset > now.saturating_sub(1) && reset <= now + window,
        "reset {reset} in (now, now + window]"
    );
    let policy = response.headers()["ratelimit-policy"].to_str().unwrap();
    assert!(
        policy.ends_with(&format!(";q={limit};w={window}")),
        "{policy}"
    );
    let draft = response.headers()["ratelimit"].to_str().unwrap();
    assert!(draft.contains(&format!(";r={remaining};t=")), "{draft}");
    (remaining, reset)
}

#[tokio::test]
async fn rate_limit_headers_are_on_200_401_403_404_and_429_responses() {
    let app = TestApp::with_limiter(in_process(4, 900), TrustedProxies::default()).await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let ok = app.get("/api/v1/identities", &key).await;
    assert_eq!(ok.status(), StatusCode::OK);
    assert_eq!(assert_rate_headers(&ok, 4, 900).0, 3);
    let forbidden = app.get("/api/v1/findings", &key).await;
    assert_eq!(forbidden.status(), StatusCode::FORBIDDEN);
    assert_eq!(assert_rate_headers(&forbidden, 4, 900).0, 2);
    let missing = app.get("/api/v1/identities/nope", &key).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(assert_rate_headers(&missing, 4, 900).0, 1);
    let unauthorized = app
        .client
        .get(app.url("/api/v1/identities"))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        assert_rate_headers(&unauthorized, 4, 900).0,
        3,
        "the client address has its own bucket"
    );
    app.get("/api/v1/identities", &key).await;
    let limited = app.get("/api/v1/identities", &key).await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(assert_rate_headers(&limited, 4, 900).0, 0);
}

#[tokio::test]
async fn remaining_falls_by_one_per_request_and_the_limit_plus_one_is_429_with_retry_after() {
    // The limiter's clock is held where the app started: read around it.
    let before = epoch_secs();
    let app = TestApp::with_limiter(in_process(5, 900), TrustedProxies::default()).await;
    let after = epoch_secs();
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let mut remaining = Vec::new();
    for _ in 0..5 {
        let response = app.get("/api/v1/tenants", &key).await;
        assert_eq!(response.status(), StatusCode::OK);
        remaining.push(assert_rate_headers(&response, 5, 900).0);
    }
    assert_eq!(remaining, vec![4, 3, 2, 1, 0]);
    let limited = app.get("/api/v1/tenants", &key).await;
    let (_, reset) = assert_rate_headers(&limited, 5, 900);
    let retry_after = header(&limited, "retry-after");
    assert!(retry_after >= 1);
    assert!(
        (reset - after).saturating_sub(1) <= retry_after && retry_after <= reset - before + 1,
        "Retry-After {retry_after} matches the reset {reset} on the limiter's clock \
         (held between {before} and {after})"
    );
    assert_error(limited, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
}

#[tokio::test]
async fn requests_pass_again_once_the_window_resets() {
    let clock = Arc::new(ManualClock::starting_now());
    let limiter = clock.clone();
    let app = TestApp::with_limiter(
        move || {
            Arc::new(InProcessRateLimiter::new(
                RatePolicy {
                    limit: 2,
                    window_secs: 60,
                },
                limiter,
            ))
        },
        TrustedProxies::default(),
    )
    .await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let limited = loop {
        let response = app.get("/api/v1/tenants", &key).await;
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            break response;
        }
    };
    let retry_after = header(&limited, "retry-after");
    assert!(retry_after <= 60, "{retry_after}");
    clock.advance(Duration::from_secs(retry_after - 1));
    assert_eq!(
        app.get("/api/v1/tenants", &key).await.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "a second before the reset"
    );
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        app.get("/api/v1/tenants", &key).await.status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn two_keys_have_independent_windows() {
    let app = TestApp::with_limiter(in_process(2, 900), TrustedProxies::default()).await;
    let (customer, _) = app.customer("A").await;
    let (_, first) = app.key(customer, &[Scope::ReadIdentities]).await;
    let (_, second) = app.key(customer, &[Scope::ReadIdentities]).await;
    for _ in 0..2 {
        assert_eq!(
            app.get("/api/v1/tenants", &first).await.status(),
            StatusCode::OK
        );
    }
    assert_eq!(
        app.get("/api/v1/tenants", &first).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    let other = app.get("/api/v1/tenants", &second).await;
    assert_eq!(other.status(), StatusCode::OK);
    assert_eq!(header(&other, "x-ratelimit-remaining"), 1);
}

#[tokio::test]
async fn requests_without_a_valid_key_are_limited_per_client_address() {
    let app = TestApp::with_limiter(in_process(3, 900), TrustedProxies::default()).await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    // A key in use at this address...
    assert_eq!(
        app.get("/api/v1/tenants", &key).await.status(),
        StatusCode::OK
    );
    let guess = posture_domain::ApiKeySecret::generate().unwrap();
    for _ in 0..3 {
        assert_eq!(
            app.get("/api/v1/tenants", guess.expose()).await.status(),
            StatusCode::UNAUTHORIZED
        );
    }
    let throttled = app.get("/api/v1/tenants", guess.expose()).await;
    assert_error(throttled, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    // The public contract counts against the same address bucket.
    assert_eq!(
        app.client
            .get(app.url("/api/v1/openapi.json"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // ...keeps its own window when the address is out of budget.
    assert_eq!(
        app.get("/api/v1/tenants", &key).await.status(),
        StatusCode::OK
    );
}

/// GET `path` with `key`, as the client `forwarded` behind a trusted proxy.
async fn get_as(app: &TestApp, forwarded: &str, path: &str, key: &str) -> StatusCode {
    app.client
        .get(app.url(path))
        .bearer_auth(key)
        .header("X-Forwarded-For", forwarded)
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn a_flood_of_unknown_keys_stops_reaching_the_database_once_its_address_is_out_of_budget() {
    let proxies = TrustedProxies::parse("127.0.0.1").unwrap();
    let app = TestApp::with_limiter(in_process(10, 900), proxies).await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let lookups = || app.store.key_cache_stats().misses;
    let before = lookups();
    let mut statuses = Vec::new();
    for _ in 0..100 {
        let made_up = posture_domain::ApiKeySecret::generate().unwrap();
        statuses.push(get_as(&app, "203.0.113.7", "/api/v1/tenants", made_up.expose()).await);
    }
    assert!(
        statuses[..10]
            .iter()
            .all(|s| *s == StatusCode::UNAUTHORIZED)
    );
    assert!(
        statuses[10..]
            .iter()
            .all(|s| *s == StatusCode::TOO_MANY_REQUESTS)
    );
    assert_eq!(
        lookups() - before,
        10,
        "only the address's budget of unknown keys was looked up"
    );
    // A valid key from another address answers, meanwhile.
    assert_eq!(
        get_as(&app, "198.51.100.9", "/api/v1/tenants", &key).await,
        StatusCode::OK
    );
    // One bad key repeated costs one lookup: it is remembered as unknown.
    let before = lookups();
    let repeated = posture_domain::ApiKeySecret::generate().unwrap();
    for _ in 0..5 {
        assert_eq!(
            get_as(&app, "192.0.2.50", "/api/v1/tenants", repeated.expose()).await,
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(lookups() - before, 1);
}

#[tokio::test]
async fn behind_a_trusted_proxy_each_forwarded_client_has_its_own_bucket() {
    let proxies = TrustedProxies::parse("127.0.0.1").unwrap();
    let app = TestApp::with_limiter(in_process(1, 900), proxies).await;
    let get = |forwarded: &'static str| {
        app.client
            .get(app.url("/api/v1/openapi.json"))
            .header("X-Forwarded-For", forwarded)
            .send()
    };
    assert_eq!(get("198.51.100.1").await.unwrap().status(), StatusCode::OK);
    assert_eq!(
        get("198.51.100.1").await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(get("198.51.100.2").await.unwrap().status(), StatusCode::OK);
    // A spoofed left-most entry does not escape the real client's bucket.
    assert_eq!(
        get("203.0.113.7, 198.51.100.1").await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn without_trusted_proxies_x_forwarded_for_is_ignored() {
    let app = TestApp::with_limiter(in_process(1, 900), TrustedProxies::default()).await;
    let get = |forwarded: &'static str| {
        app.client
            .get(app.url("/api/v1/openapi.json"))
            .header("X-Forwarded-For", forwarded)
            .send()
    };
    assert_eq!(get("198.51.100.1").await.unwrap().status(), StatusCode::OK);
    assert_eq!(
        get("198.51.100.2").await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

/// A `posture-api serve` process of its own.
pub(crate) struct ApiProcess {
    child: Child,
    pub(crate) base: String,
}

impl ApiProcess {
    fn spawn(db: &TestDb, redis: &str, limit: u32) -> Self {
        Self::spawn_with(db, redis, limit, &[])
    }

    /// With extra environment variables.
    pub(crate) fn spawn_with(db: &TestDb, redis: &str, limit: u32, env: &[(&str, &str)]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_posture-api"))
            .arg("serve")
            .env("DATABASE_URL", db.runtime_url())
            .env("POSTURE_BIND", format!("127.0.0.1:{port}"))
            .env(
                "POSTURE_SECRET_KEY",
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            )
            .env("REDIS_URL", redis)
            .env("POSTURE_RATE_LIMIT", limit.to_string())
            // Windows are fixed: one that turned over mid-test would restart the counts (it
            // happened once with 15 minutes). A day's window turns over once a day, at a
            // moment of each key's own.
            .env("POSTURE_RATE_WINDOW_SECS", "86400")
            .env("POSTURE_WORKERS", "1")
            .env("POSTURE_LOG", "warn")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        posture_test_support::waits::wait_for_port("posture-api", port, Duration::from_secs(20));
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for ApiProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn two_api_processes_sharing_one_redis_count_a_key_together() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let first = ApiProcess::spawn(&app.db, &redis_url(), 6);
    let second = ApiProcess::spawn(&app.db, &redis_url(), 6);
    let http = client();
    let mut statuses = Vec::new();
    for i in 0..7 {
        let base = if i % 2 == 0 {
            &first.base
        } else {
            &second.base
        };
        let response = http
            .get(format!("{base}/api/v1/tenants"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(
        statuses,
        vec![200, 200, 200, 200, 200, 200, 429],
        "6 allowed across both, the 7th refused"
    );
}

#[tokio::test]
async fn a_redis_outage_fails_no_request_and_shared_counting_resumes_after_it() {
    let mut redis = RedisServer::start().unwrap();
    let url = redis.url();
    let policy = RatePolicy {
        limit: 100,
        window_secs: 900,
    };
    let limiter: Arc<dyn RateLimiter> =
        Arc::new(RedisRateLimiter::new(&url, policy, system()).unwrap());
    let app = TestApp::with_limiter(move || limiter, TrustedProxies::default()).await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    assert_eq!(
        header(
            &app.get("/api/v1/tenants", &key).await,
            "x-ratelimit-remaining"
        ),
        99
    );
    let ready = app
        .client
        .get(app.url("/readyz"))
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(ready["checks"]["rateLimiter"]["mode"], "shared");

    redis.stop();
    for _ in 0..5 {
        assert_eq!(
            app.get("/api/v1/tenants", &key).await.status(),
            StatusCode::OK,
            "served during the outage"
        );
    }
    let ready = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(
        ready.status(),
        StatusCode::OK,
        "a degraded limiter does not make the instance unready"
    );
    let ready: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(ready["checks"]["rateLimiter"]["mode"], "degraded");

    redis.restart().unwrap();
    // Counted in the instance until the limiter's probe finds Redis (that one counts there).
    wait_for(
        "the limiter to share again",
        Duration::from_secs(5),
        || async {
            app.get("/api/v1/tenants", &key).await;
            let ready = app.get_public_json("/readyz").await;
            (ready["checks"]["rateLimiter"]["mode"] == "shared").then_some(())
        },
    )
    .await;
    // Another instance on the same Redis now sees this key's count: counting is shared again.
    let other = RedisRateLimiter::new(&url, policy, system()).unwrap();
    let seen = other
        .check(&posture_domain::rate_limit::RateBucket::Key(
            app.store_key_id(&key).await,
        ))
        .await
        .unwrap();
    assert_eq!(
        seen.remaining, 98,
        "one request counted in the restarted Redis, plus this check"
    );
    let ready = app.get_public_json("/readyz").await;
    assert_eq!(ready["checks"]["rateLimiter"]["mode"], "shared");
}

#[tokio::test]
async fn health_routes_are_neither_authenticated_nor_counted() {
    let app = TestApp::with_limiter(in_process(1, 900), TrustedProxies::default()).await;
    for _ in 0..3 {
        let healthz = app.client.get(app.url("/healthz")).send().await.unwrap();
        assert_eq!(healthz.status(), StatusCode::OK);
        assert!(healthz.headers().get("x-ratelimit-limit").is_none());
        let readyz = app.client.get(app.url("/readyz")).send().await.unwrap();
        assert_eq!(readyz.status(), StatusCode::OK);
        let body: serde_json::Value = readyz.json().await.unwrap();
        assert_eq!(body["status"], "ready");
        assert_eq!(body["checks"]["database"], "ok");
        assert_eq!(body["checks"]["schema"], "current");
        assert_eq!(body["checks"]["rateLimiter"]["mode"], "in-process");
    }
}
