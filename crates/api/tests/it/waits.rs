//! Waiting, in tests, for what happens off the request path: what another process changed
//! reaching a [`TestApp`]'s key cache (through `NOTIFY`), a write the server spawned. Each
//! wait polls for the event and has a bound; none stands in for a clock.

use std::time::Duration;

use reqwest::StatusCode;

use crate::support::TestApp;

impl TestApp {
    /// Waits until `key` is refused (401) after a change made by another process, which
    /// reaches this server's key cache through `NOTIFY`; fails if that takes a second.
    pub async fn refused_within_a_second(&self, key: &str, change: &str) {
        self.refused_within(key, change, Duration::from_secs(1))
            .await;
    }

    /// Waits until the key is refused (401), failing if that takes longer than `bound`.
    pub async fn refused_within(&self, key: &str, change: &str, bound: Duration) {
        let what = format!("the {change} reaching the cache");
        posture_test_support::waits::wait_for(&what, bound, || async move {
            let status = self.get("/api/v1/identities", key).await.status();
            assert!(
                status == StatusCode::OK || status == StatusCode::UNAUTHORIZED,
                "{status}"
            );
            (status == StatusCode::UNAUTHORIZED).then_some(())
        })
        .await;
    }

    /// Waits until the server serves keys from its cache (its `LISTEN` connection is up).
    pub async fn key_cache_live(&self) {
        let store = &self.store;
        posture_test_support::waits::wait_for(
            "the key cache going live",
            Duration::from_secs(10),
            || async move { store.key_cache_stats().live.then_some(()) },
        )
        .await;
    }
}

/// Waits for what the server does off the request path (a write it spawned): polls `probe`
/// until it gives a value, failing after 5 seconds.
pub async fn wait_for<T, F, Fut>(probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    posture_test_support::waits::wait_for("what was awaited", Duration::from_secs(5), probe).await
}
