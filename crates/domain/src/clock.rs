//! The clock of the decisions the service makes in its own process: whether a cached key has
//! expired, whether a console session is idle or past its lifetime, when a sign-in attempt
//! has lapsed, when a rate-limit window ends. Production reads the system clock
//! ([`SystemClock`]); tests hold a [`ManualClock`] and move it, so a test of expiry states
//! the time it means instead of sleeping past it.
//!
//! What the database decides stays on the database's clock (`now()` in SQL): a row's
//! `modifiedAt`, `created_at` and `updated_at`, a pass's time, a delivery's lease and which
//! deliveries are due. The delivery worker's own times (an attempt's start, its next
//! attempt's time, the sweeps' cut-offs) are on this clock and compared with the database's:
//! in production both are the system's; a test that moves a worker's clock moves it past
//! the database's rows on purpose.

use std::{
    fmt,
    sync::{Arc, Mutex},
    time::Duration,
};

use chrono::{DateTime, SubsecRound as _, Utc};

/// What time it is.
pub trait Clock: Send + Sync + fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
}

/// The system's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// The system's clock, shared.
pub fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// A clock that stands still until it is moved (tests).
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock standing at `at`.
    pub fn at(at: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(at),
        }
    }

    /// A clock standing at the system's time now, to the whole second (so the times it
    /// gives survive the database's microseconds and the wire's milliseconds unchanged).
    pub fn starting_now() -> Self {
        Self::at(Utc::now().trunc_subsecs(0))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DateTime<Utc>> {
        self.now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Moves the clock `by` forward.
    pub fn advance(&self, by: Duration) {
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        let mut now = self.lock();
        *now = now.checked_add_signed(by).unwrap_or(*now);
    }

    /// Sets the clock to `at` (backwards too: a clock that steps back is a case to test).
    pub fn set(&self, at: DateTime<Utc>) {
        *self.lock() = at;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_stands_still_until_moved() {
        let start = Utc::now();
        let clock = ManualClock::at(start);
        assert_eq!(clock.now(), start);
        clock.advance(Duration::from_millis(1500));
        assert_eq!(clock.now(), start + chrono::Duration::milliseconds(1500));
        clock.set(start);
        assert_eq!(clock.now(), start);
    }
}
