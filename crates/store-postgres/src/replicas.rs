//! Read replicas: streaming standbys that serve the read routes while they keep up.
//!
//! Each replica has a pool of its own. A background task measures every replica's replay
//! lag at a fixed interval (never per request); a replica is usable while its lag is within
//! the bound, and the read routes take the usable ones in turn ([`Replicas::pick`]). When
//! none is usable, reads go to the primary. A replica starts unusable, until its first
//! check.
//!
//! The lag bounds how old the newest data is that a reader of the replica would miss
//! (`replica_lag.rs` states the rule): the time since the latest check whose primary WAL
//! position the replica has replayed past, or since the last transaction it replayed
//! committed on the primary, whichever is smaller.

use std::{
    fmt,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use posture_domain::Error;

use crate::{
    PgConfig, PgStore,
    error::db_error,
    replay::ReplayState,
    replica_lag::{Checks, PrimaryAt, Reading, primary_position_sql},
};

/// How the replicas are used.
#[derive(Clone, Debug)]
pub struct ReplicaPolicy {
    /// A replica whose lag exceeds this is skipped.
    pub max_lag: Duration,
    /// How often every replica's lag is measured.
    pub check_every: Duration,
}

impl Default for ReplicaPolicy {
    fn default() -> Self {
        Self {
            max_lag: Duration::from_secs(5),
            check_every: Duration::from_secs(1),
        }
    }
}

/// One replica's state, as the last check saw it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplicaStatus {
    /// Whether reads go to it.
    pub usable: bool,
    /// Its replay lag in seconds (`None`: not measured, or it did not answer).
    pub lag_seconds: Option<f64>,
}

struct Replica {
    store: PgStore,
    /// What the store's data versions know of its replay (the check records it).
    replay: Arc<ReplayState>,
    usable: AtomicBool,
    /// `f64::to_bits` of the lag in seconds; `NO_LAG_MEASURED` when unknown.
    lag_bits: AtomicU64,
    /// The primary's positions at its recent checks (`replica_lag.rs`).
    checks: Checks,
}

const NO_LAG_MEASURED: u64 = u64::MAX;

/// The replicas of one primary, with their lag checks.
pub struct Replicas {
    /// Where every check reads the primary's WAL position first.
    primary: PgStore,
    replicas: Vec<Replica>,
    policy: ReplicaPolicy,
    next: AtomicUsize,
}

impl fmt::Debug for Replicas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replicas")
            .field("count", &self.replicas.len())
            .field("policy", &self.policy)
            .field("status", &self.status())
            .finish()
    }
}

impl Replicas {
    /// Pools on each of `urls`, with the settings of `base` (pool size, timeouts), whose
    /// data versions come from `primary`'s cache once replayed (`data_versions.rs`).
    /// Nothing connects yet; every replica is unusable until [`Replicas::start_checks`]
    /// measures it.
    pub fn new(
        primary: &PgStore,
        base: &PgConfig,
        urls: &[String],
        policy: ReplicaPolicy,
    ) -> Result<Self, Error> {
        let replicas = urls
            .iter()
            .map(|url| {
                let mut config = base.clone();
                config.url.clone_from(url);
                config.listen_url = None;
                let replay = Arc::new(ReplayState::default());
                Ok(Replica {
                    store: PgStore::new(&config)?.replica_of(primary, replay.clone()),
                    replay,
                    usable: AtomicBool::new(false),
                    lag_bits: AtomicU64::new(NO_LAG_MEASURED),
                    checks: Checks::default(),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Self {
            primary: primary.clone(),
            replicas,
            policy,
            next: AtomicUsize::new(0),
        })
    }

    pub fn len(&self) -> usize {
        self.replicas.len()
    }

    pub fn is_empty(&self) -> bool {
        self.replicas.is_empty()
    }

    /// The index of the next usable replica in turn; `None` when none is usable (read the
    /// primary).
    pub fn pick(&self) -> Option<usize> {
        let count = self.replicas.len();
        if count == 0 {
            return None;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..count)
            .map(|i| (start + i) % count)
            .find(|&i| self.replicas[i].usable.load(Ordering::Relaxed))
    }

    /// The stores of the replicas, in the order of the URLs (the indexes of
    /// [`Replicas::pick`]).
    pub fn stores(&self) -> impl Iterator<Item = &PgStore> {
        self.replicas.iter().map(|r| &r.store)
    }

    /// Every replica's state, in the order of the URLs.
    pub fn status(&self) -> Vec<ReplicaStatus> {
        self.replicas
            .iter()
            .map(|r| {
                let bits = r.lag_bits.load(Ordering::Relaxed);
                ReplicaStatus {
                    usable: r.usable.load(Ordering::Relaxed),
                    lag_seconds: (bits != NO_LAG_MEASURED).then(|| f64::from_bits(bits)),
                }
            })
            .collect()
    }

    /// Measures every replica now, and then every `check_every`, for as long as the
    /// runtime runs.
    pub fn start_checks(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let replicas = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(replicas.policy.check_every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut was_usable = vec![None; replicas.replicas.len()];
            loop {
                ticks.tick().await;
                let primary = replicas.primary_position().await;
                // All at once: a replica that does not answer delays no other's check.
                let checks = replicas.replicas.iter().map(|r| replicas.check(r, primary));
                let usable = futures_util::future::join_all(checks).await;
                for (index, (replica, usable)) in replicas.replicas.iter().zip(usable).enumerate() {
                    if was_usable[index] != Some(usable) {
                        log_change(index, usable, replica, &replicas.policy);
                        was_usable[index] = Some(usable);
                    }
                }
            }
        })
    }

    /// How long a check waits for a node's answer.
    fn patience(&self) -> Duration {
        self.policy.check_every.max(Duration::from_millis(500))
    }

    /// The primary's WAL insert position now; `None` when it does not answer in time (the
    /// replicas then speak for themselves: `replica_lag.rs`).
    async fn primary_position(&self) -> Option<PrimaryAt> {
        use diesel_async::RunQueryDsl as _;
        #[derive(diesel::QueryableByName)]
        struct Position {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            position: i64,
        }
        let asked = Instant::now();
        let read = async {
            let mut conn = self.primary.conn().await.ok()?;
            let row: Position = diesel::sql_query(primary_position_sql())
                .get_result(&mut conn)
                .await
                .ok()?;
            Some(row.position)
        };
        let position = tokio::time::timeout(self.patience(), read).await.ok()??;
        Some(PrimaryAt { position, asked })
    }

    /// Measures one replica against the `primary`'s position read for this check, and
    /// records the result; returns whether it is usable.
    async fn check(&self, replica: &Replica, primary: Option<PrimaryAt>) -> bool {
        // A replica that does not answer within the interval is as good as lagging.
        let lag = match tokio::time::timeout(self.patience(), read(&replica.store)).await {
            Ok(Ok(reading)) => {
                replica.replay.replayed(reading.position.max(0) as u64);
                Some(replica.checks.lag(&reading, primary, Instant::now()))
            }
            Ok(Err(_)) | Err(_) => None,
        };
        let usable = lag.is_some_and(|lag| lag <= self.policy.max_lag.as_secs_f64());
        replica
            .lag_bits
            .store(lag.map_or(NO_LAG_MEASURED, f64::to_bits), Ordering::Relaxed);
        replica.usable.store(usable, Ordering::Relaxed);
        usable
    }
}

fn log_change(index: usize, usable: bool, replica: &Replica, policy: &ReplicaPolicy) {
    let number = index + 1;
    let bits = replica.lag_bits.load(Ordering::Relaxed);
    let lag = (bits != NO_LAG_MEASURED).then(|| f64::from_bits(bits));
    if usable {
        tracing::info!(replica = number, lag_seconds = ?lag, "read replica in use");
    } else {
        tracing::warn!(
            replica = number,
            lag_seconds = ?lag,
            max_lag_seconds = policy.max_lag.as_secs_f64(),
            "read replica skipped (lagging or not answering): its reads go to the primary"
        );
    }
}

/// What the node behind `store` says of its replay.
async fn read(store: &PgStore) -> Result<Reading, Error> {
    // Scoped here: its `load` would shadow the atomics' elsewhere in this module.
    use diesel_async::RunQueryDsl as _;
    let mut conn = store.conn().await?;
    diesel::sql_query(Reading::sql())
        .get_result(&mut conn)
        .await
        .map_err(db_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replicas(usable: &[bool]) -> Replicas {
        let base = PgConfig::new(
            "postgres://posture@127.0.0.1:1/posture",
            posture_domain::clock::system(),
        );
        let urls = vec![base.url.clone(); usable.len()];
        let primary = PgStore::new(&base).unwrap();
        let replicas = Replicas::new(&primary, &base, &urls, ReplicaPolicy::default()).unwrap();
        for (replica, usable) in replicas.replicas.iter().zip(usable) {
            replica.usable.store(*usable, Ordering::Relaxed);
        }
        replicas
    }

    fn picked(replicas: &Replicas, n: usize) -> Vec<Option<usize>> {
        (0..n).map(|_| replicas.pick()).collect()
    }

    #[tokio::test]
    async fn usable_replicas_are_taken_in_turn() {
        let replicas = replicas(&[true, true, true]);
        assert_eq!(picked(&replicas, 4), [Some(0), Some(1), Some(2), Some(0)]);
    }

    #[tokio::test]
    async fn a_skipped_replica_is_passed_over() {
        let replicas = replicas(&[true, false, true]);
        assert_eq!(picked(&replicas, 4), [Some(0), Some(2), Some(2), Some(0)]);
    }

    #[tokio::test]
    async fn no_usable_replica_means_the_primary() {
        assert_eq!(picked(&replicas(&[false, false]), 2), [None, None]);
        assert_eq!(picked(&replicas(&[]), 1), [None]);
    }

    #[tokio::test]
    async fn replicas_start_unusable_until_measured() {
        let base = PgConfig::new(
            "postgres://posture@127.0.0.1:1/posture",
            posture_domain::clock::system(),
        );
        let replicas = Replicas::new(
            &PgStore::new(&base).unwrap(),
            &base,
            std::slice::from_ref(&base.url),
            ReplicaPolicy::default(),
        )
        .unwrap();
        assert_eq!(
            replicas.status(),
            [ReplicaStatus {
                usable: false,
                lag_seconds: None
            }]
        );
        assert!(replicas.pick().is_none());
    }
}
