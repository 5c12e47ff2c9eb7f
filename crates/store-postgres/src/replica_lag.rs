//! The replay lag of a read replica: how old the newest data is that a reader of it would
//! miss, as an upper bound measured on the replica alone (`replicas.rs` reads it at every
//! check).
//!
//! - A node that is not in recovery (a promoted standby, or the primary itself) misses
//!   nothing: 0.
//! - A replica whose WAL receiver is not streaming (it lost its primary, or its replay is
//!   stuck behind a gap) misses whatever the primary committed since the last transaction it
//!   replayed: the time since that transaction committed on the primary. An idle one ages
//!   too, which only makes it skipped early.
//! - A streaming replica has two bounds, and the lag is the smaller. The first is the one
//!   above. The second is its own replay's progress: if all the WAL it had received at an
//!   earlier check is replayed now, a reader misses at most what arrived since that check.
//!   So one that has replayed all it received misses nothing (0), and one replaying WAL that
//!   holds no commit (a vacuum's, or the pruning that reads do after a bulk load) stays as
//!   fresh as its replay keeps up: the first bound alone would count the seconds since the
//!   last commit it replayed, however current it is.

use std::{
    collections::VecDeque,
    sync::Mutex,
    time::{Duration, Instant},
};

/// What one check read on a replica.
#[derive(Clone, Copy, Debug, diesel::QueryableByName)]
pub(crate) struct Reading {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub in_recovery: bool,
    /// Whether its WAL receiver is running.
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub streaming: bool,
    /// The WAL position it has received and flushed (0 on a primary).
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub received: i64,
    /// The WAL position it has replayed (0 on a primary).
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub replayed: i64,
    /// Seconds since the last transaction it replayed committed on the primary (infinite
    /// when it replayed none).
    #[diesel(sql_type = diesel::sql_types::Double)]
    pub since_commit: f64,
    /// The position the store's data versions read (`data_versions::WAL_POSITION`).
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub position: i64,
}

impl Reading {
    /// The statement that reads it (in one round trip, with `position` as `position_sql`).
    pub(crate) fn sql(position_sql: &str) -> String {
        format!(
            "SELECT pg_is_in_recovery() AS in_recovery, \
                    EXISTS (SELECT 1 FROM pg_stat_wal_receiver) AS streaming, \
                    coalesce(pg_last_wal_receive_lsn() - '0/0'::pg_lsn, 0)::int8 AS received, \
                    coalesce(pg_last_wal_replay_lsn() - '0/0'::pg_lsn, 0)::int8 AS replayed, \
                    coalesce(extract(epoch FROM clock_timestamp() \
                                     - pg_last_xact_replay_timestamp()), \
                             'Infinity')::float8 AS since_commit, \
                    {position_sql} AS position"
        )
    }
}

/// What a replica had received at its recent checks, and when: the progress bound.
#[derive(Debug, Default)]
pub(crate) struct Received(Mutex<VecDeque<(i64, Instant)>>);

impl Received {
    /// Checks remembered: at the default interval a minute's worth; a replica further
    /// behind than that has only the commit bound.
    const KEPT: usize = 64;

    /// Records `reading`, read at `now`, and returns the replica's lag in seconds by the
    /// module's rule.
    pub(crate) fn lag(&self, reading: &Reading, now: Instant) -> f64 {
        let mut checks = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !reading.in_recovery {
            checks.clear();
            return 0.0;
        }
        let since_commit = reading.since_commit.max(0.0);
        if !reading.streaming {
            // What it received before it stopped says nothing of what it misses now.
            checks.clear();
            return since_commit;
        }
        checks.push_back((reading.received, now));
        if checks.len() > Self::KEPT {
            checks.pop_front();
        }
        // The latest check (this one included) whose received WAL is all replayed.
        let caught_up = checks
            .iter()
            .rev()
            .find(|(received, _)| *received <= reading.replayed);
        match caught_up {
            Some((_, at)) => seconds(now.saturating_duration_since(*at)).min(since_commit),
            None => since_commit,
        }
    }
}

fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(streaming: bool, received: i64, replayed: i64, since_commit: f64) -> Reading {
        Reading {
            in_recovery: true,
            streaming,
            received,
            replayed,
            since_commit,
            position: replayed,
        }
    }

    #[test]
    fn a_primary_misses_nothing() {
        let primary = Reading {
            in_recovery: false,
            ..reading(false, 0, 0, f64::INFINITY)
        };
        assert_eq!(Received::default().lag(&primary, Instant::now()), 0.0);
    }

    #[test]
    fn a_streaming_replica_that_replayed_all_it_received_misses_nothing() {
        // However long ago its last replayed commit was (an idle primary).
        let lag = Received::default().lag(&reading(true, 500, 500, 120.0), Instant::now());
        assert_eq!(lag, 0.0);
    }

    #[test]
    fn replay_that_keeps_up_with_wal_without_commits_stays_fresh() {
        // A vacuum's WAL streaming in, its last commit 7 s ago: each check finds all the
        // previous one had received replayed.
        let received = Received::default();
        let start = Instant::now();
        let first = received.lag(&reading(true, 1_000, 900, 7.0), start);
        assert_eq!(first, 7.0, "no earlier check to go by: the commit bound");
        let later = start + Duration::from_millis(100);
        let second = received.lag(&reading(true, 2_000, 1_500, 7.1), later);
        assert!((second - 0.1).abs() < 1e-9, "{second}");
    }

    #[test]
    fn paused_replay_ages_from_the_last_check_it_had_caught_up_with() {
        let received = Received::default();
        let start = Instant::now();
        assert_eq!(received.lag(&reading(true, 1_000, 1_000, 0.5), start), 0.0);
        // Replay paused at 1,000 while WAL with commits keeps arriving.
        for tenth in 1..=30u64 {
            let at = start + Duration::from_millis(100 * tenth);
            let since_commit = 0.5 + tenth as f64 / 10.0;
            let lag = received.lag(
                &reading(true, 1_000 + tenth as i64, 1_000, since_commit),
                at,
            );
            let expected = tenth as f64 / 10.0;
            assert!((lag - expected).abs() < 1e-9, "{tenth}: {lag}");
        }
    }

    #[test]
    fn a_replica_that_stopped_streaming_ages_from_its_last_commit() {
        let received = Received::default();
        let start = Instant::now();
        assert_eq!(received.lag(&reading(true, 1_000, 1_000, 0.0), start), 0.0);
        // Its receiver gone, it has replayed all it got: that is no news of the primary.
        let later = start + Duration::from_secs(3);
        assert_eq!(received.lag(&reading(false, 1_000, 1_000, 9.0), later), 9.0);
        // Streaming again: the checks before the gap no longer count.
        let again = later + Duration::from_secs(1);
        assert_eq!(
            received.lag(&reading(true, 2_000, 1_500, 10.0), again),
            10.0
        );
    }

    #[test]
    fn a_replica_further_behind_than_its_checks_remember_has_the_commit_bound() {
        let received = Received::default();
        let start = Instant::now();
        assert_eq!(received.lag(&reading(true, 999, 999, 0.0), start), 0.0);
        // Replay stuck at 999 for as many checks as are remembered: the one it had caught
        // up at is forgotten, and only the commit bound is left.
        let checks = Received::KEPT as u64;
        for check in 1..checks {
            let at = start + Duration::from_secs(check);
            let lag = received.lag(&reading(true, 1_000 + check as i64, 999, 100.0), at);
            assert_eq!(lag, check as f64);
        }
        let at = start + Duration::from_secs(checks);
        assert_eq!(received.lag(&reading(true, 5_000, 999, 100.0), at), 100.0);
    }
}
