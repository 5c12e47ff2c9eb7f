//! The database check of `/readyz`, shared: made at most once per [`READINESS_TTL`]
//! whatever the number of callers (the route is public: a flood of probes must not become a
//! flood of queries).

use std::time::{Duration, Instant};

/// How long a database check of `/readyz` is reused.
pub const READINESS_TTL: Duration = Duration::from_secs(1);

/// What the last database check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatabaseCheck {
    pub reachable: bool,
    pub schema: &'static str,
}

/// The last database check of `/readyz` and when it was made. Callers that arrive while a
/// check runs wait for it and share its result.
#[derive(Default)]
pub struct ReadinessCache(tokio::sync::Mutex<Option<(Instant, DatabaseCheck)>>);

impl ReadinessCache {
    /// The cached check while it is fresh, else the result of `check` (cached).
    pub async fn get_or_check<F, Fut>(&self, check: F) -> DatabaseCheck
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = DatabaseCheck>,
    {
        let mut last = self.0.lock().await;
        if let Some((at, found)) = *last
            && at.elapsed() < READINESS_TTL
        {
            return found;
        }
        let found = check().await;
        *last = Some((Instant::now(), found));
        found
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn probes_within_the_ttl_share_one_database_check() {
        let cache = ReadinessCache::default();
        let checks = AtomicUsize::new(0);
        let check = || async {
            checks.fetch_add(1, Ordering::SeqCst);
            DatabaseCheck {
                reachable: true,
                schema: "current",
            }
        };
        for _ in 0..100 {
            assert!(cache.get_or_check(check).await.reachable);
        }
        assert_eq!(checks.load(Ordering::SeqCst), 1);
        tokio::time::sleep(READINESS_TTL).await;
        cache.get_or_check(check).await;
        assert_eq!(
            checks.load(Ordering::SeqCst),
            2,
            "a stale check is made again"
        );
    }
}
