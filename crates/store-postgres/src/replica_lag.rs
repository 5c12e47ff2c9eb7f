//! The replay lag of a read replica: an upper bound on how old the newest data is that a
//! reader of it would miss (`replicas.rs` measures it at every check).
//!
//! Every check first reads the primary's WAL insert position, noting the moment before it
//! asked. Whatever the primary had committed by that moment lies before that position, so
//! once the replica has replayed up to it, a reader of the replica misses only what was
//! committed since. The lag is the time since the latest such moment the replica has
//! replayed past, and it is a bound whatever the WAL holds: a replica replaying a vacuum's
//! WAL (no commits) as fast as it comes stays fresh, one that receives late, is paused, is
//! stuck or lost its primary ages from the last moment it had caught up with.
//!
//! A second bound holds too: the time since the last transaction the replica replayed
//! committed on the primary (nothing newer can be missed than what came after it). The lag
//! is the smaller of the two. When the primary could not be read at any remembered check
//! (it is down, say), the replica's own word is taken: nothing missed when its receiver is
//! streaming and has replayed all it received, else the second bound. A node that is not in
//! recovery (a promoted standby, or the primary itself) misses nothing.

use std::{
    collections::VecDeque,
    sync::Mutex,
    time::{Duration, Instant},
};

use crate::data_versions::WAL_POSITION;

/// What one check read on a replica.
#[derive(Clone, Copy, Debug, diesel::QueryableByName)]
pub(crate) struct Reading {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub in_recovery: bool,
    /// Whether its WAL receiver is streaming.
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub streaming: bool,
    /// The WAL position it has received and flushed (0 on a primary).
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub received: i64,
    /// Seconds since the last transaction it replayed committed on the primary (infinite
    /// when it replayed none).
    #[diesel(sql_type = diesel::sql_types::Double)]
    pub since_commit: f64,
    /// Its WAL position as the store's data versions read it ([`WAL_POSITION`]): on a
    /// replica, what it has replayed.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub position: i64,
}

impl Reading {
    /// The statement that reads it, in one round trip.
    pub(crate) fn sql() -> String {
        format!(
            "SELECT pg_is_in_recovery() AS in_recovery, \
                    EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming') \
                        AS streaming, \
                    coalesce(pg_last_wal_receive_lsn() - '0/0'::pg_lsn, 0)::int8 AS received, \
                    coalesce(extract(epoch FROM clock_timestamp() \
                                     - pg_last_xact_replay_timestamp()), \
                             'Infinity')::float8 AS since_commit, \
                    {WAL_POSITION} AS position"
        )
    }
}

/// The primary's WAL insert position, read at a check.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PrimaryAt {
    /// The position (bytes since `0/0`).
    pub position: i64,
    /// A moment before the primary was asked: all it had committed then lies before
    /// `position`.
    pub asked: Instant,
}

/// The statement that reads the primary's position for [`PrimaryAt`] (on a primary,
/// [`WAL_POSITION`] is its insert position).
pub(crate) fn primary_position_sql() -> String {
    format!("SELECT {WAL_POSITION} AS position")
}

/// The primary's positions at a replica's recent checks.
#[derive(Debug, Default)]
pub(crate) struct Checks(Mutex<VecDeque<PrimaryAt>>);

impl Checks {
    /// Checks remembered: at the default interval a minute's worth; a replica further
    /// behind than that has the commit bound only.
    const KEPT: usize = 64;

    /// Records this check's `primary` position (`None`: the primary could not be read) and
    /// returns the replica's lag in seconds at `now` (after `reading` was read), by the
    /// module's rule.
    pub(crate) fn lag(&self, reading: &Reading, primary: Option<PrimaryAt>, now: Instant) -> f64 {
        let mut checks = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !reading.in_recovery {
            checks.clear();
            return 0.0;
        }
        if let Some(primary) = primary {
            checks.push_back(primary);
            if checks.len() > Self::KEPT {
                checks.pop_front();
            }
        }
        let since_commit = reading.since_commit.max(0.0);
        if checks.is_empty() {
            let caught_up = reading.streaming && reading.received == reading.position;
            return if caught_up { 0.0 } else { since_commit };
        }
        // The latest moment whose primary position the replica has replayed past.
        let caught_up = checks
            .iter()
            .rev()
            .find(|check| check.position <= reading.position);
        match caught_up {
            Some(check) => seconds(now.saturating_duration_since(check.asked)).min(since_commit),
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
            since_commit,
            position: replayed,
        }
    }

    fn primary(position: i64, asked: Instant) -> Option<PrimaryAt> {
        Some(PrimaryAt { position, asked })
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_primary_misses_nothing() {
        let node = Reading {
            in_recovery: false,
            ..reading(false, 0, 0, f64::INFINITY)
        };
        let now = Instant::now();
        assert_eq!(Checks::default().lag(&node, primary(9, now), now), 0.0);
    }

    #[test]
    fn a_replica_past_the_primarys_position_misses_only_the_time_since_it_was_read() {
        // An idle primary, its last commit long ago: nothing is missed.
        let asked = Instant::now();
        let lag =
            Checks::default().lag(&reading(true, 500, 500, 120.0), primary(500, asked), asked);
        assert_eq!(lag, 0.0);
        // Read 5 ms after the primary was asked: at most those 5 ms.
        let checks = Checks::default();
        let lag = checks.lag(
            &reading(true, 600, 600, 120.0),
            primary(550, asked),
            asked + 5 * MS,
        );
        assert!((lag - 0.005).abs() < 1e-9, "{lag}");
    }

    #[test]
    fn replay_that_keeps_up_with_wal_without_commits_stays_fresh() {
        // A vacuum's WAL streaming in, the last commit 7 s ago: each check finds the
        // replica past the position of the one before.
        let checks = Checks::default();
        let start = Instant::now();
        let first = checks.lag(
            &reading(true, 1_000, 900, 7.0),
            primary(1_100, start),
            start,
        );
        assert_eq!(first, 7.0, "behind every position read: the commit bound");
        let later = start + 100 * MS;
        let second = checks.lag(
            &reading(true, 2_000, 1_500, 7.1),
            primary(2_100, later),
            later,
        );
        assert!((second - 0.1).abs() < 1e-9, "{second}");
    }

    #[test]
    fn a_replica_receiving_late_ages_even_if_it_replays_all_it_receives() {
        // It has replayed all it received, but what it received is the primary's of 3 s ago.
        let checks = Checks::default();
        let start = Instant::now();
        for second in 0..=3u64 {
            let at = start + Duration::from_secs(second);
            checks.lag(
                &reading(true, 100, 100, 9.0),
                primary(100 + second as i64, at),
                at,
            );
        }
        let now = start + Duration::from_secs(3);
        let lag = checks.lag(&reading(true, 100, 100, 9.0), None, now);
        assert_eq!(lag, 3.0, "from the last position it had replayed past");
    }

    #[test]
    fn paused_replay_ages_from_the_last_check_it_had_caught_up_with() {
        let checks = Checks::default();
        let start = Instant::now();
        assert_eq!(
            checks.lag(
                &reading(true, 1_000, 1_000, 0.5),
                primary(1_000, start),
                start
            ),
            0.0
        );
        // Replay paused at 1,000 while the primary goes on.
        for tenth in 1..=30u64 {
            let at = start + 100 * MS * tenth as u32;
            let since_commit = 0.5 + tenth as f64 / 10.0;
            let reading = reading(true, 1_000 + tenth as i64, 1_000, since_commit);
            let lag = checks.lag(&reading, primary(1_000 + tenth as i64, at), at);
            assert!((lag - tenth as f64 / 10.0).abs() < 1e-9, "{tenth}: {lag}");
        }
    }

    #[test]
    fn without_the_primarys_position_the_replicas_own_word_is_taken() {
        let now = Instant::now();
        let caught_up = Checks::default().lag(&reading(true, 700, 700, 30.0), None, now);
        assert_eq!(caught_up, 0.0, "streaming, all it received replayed");
        let behind = Checks::default().lag(&reading(true, 800, 700, 30.0), None, now);
        assert_eq!(behind, 30.0);
        let lost = Checks::default().lag(&reading(false, 700, 700, 30.0), None, now);
        assert_eq!(
            lost, 30.0,
            "not streaming: what it replayed is no news of the primary"
        );
    }

    #[test]
    fn a_replica_further_behind_than_its_checks_remember_has_the_commit_bound() {
        let checks = Checks::default();
        let start = Instant::now();
        assert_eq!(
            checks.lag(&reading(true, 999, 999, 0.0), primary(999, start), start),
            0.0
        );
        // Replay stuck at 999 for as many checks as are remembered: the one it had caught
        // up with is forgotten, and only the commit bound is left.
        let kept = Checks::KEPT as u64;
        for check in 1..kept {
            let at = start + Duration::from_secs(check);
            let reading = reading(true, 1_000 + check as i64, 999, 100.0);
            let lag = checks.lag(&reading, primary(1_000 + check as i64, at), at);
            assert_eq!(lag, check as f64);
        }
        let at = start + Duration::from_secs(kept);
        let lag = checks.lag(&reading(true, 5_000, 999, 100.0), primary(5_000, at), at);
        assert_eq!(lag, 100.0);
    }
}
