//! One scheduling group for the whole run.
//!
//! Linux's autogroup (`kernel.sched_autogroup_enabled`, on by default on desktop-style
//! kernels) shares the CPU fairly between sessions before it shares it between threads.
//! `pg_ctl` starts PostgreSQL in a session of its own, so on a machine where PostgreSQL,
//! `posture-api` and the load generator share two cores, PostgreSQL's backends got half the
//! CPU whatever their number, and threads that wake rarely (the `LISTEN` connection's check,
//! a probe's backend) waited up to a second and more for their turn: wrk saw p99 spikes of
//! 0.4-1.4 s in about one run in three, none with autogroup off (docs/performance.md). On a
//! server, services are scheduled by cgroup, not by login session; the benchmark turns
//! autogroup off for its run when it can (as root), and puts it back afterwards.

const KNOB: &str = "/proc/sys/kernel/sched_autogroup_enabled";

/// Autogroup turned off until dropped, if it was on and could be turned off.
pub struct OneGroup {
    restore: bool,
}

impl OneGroup {
    pub fn for_the_run() -> Self {
        let on = std::fs::read_to_string(KNOB).is_ok_and(|v| v.trim() == "1");
        let restore = on && std::fs::write(KNOB, "0").is_ok();
        if restore {
            crate::process::eprintln_status(
                "scheduler autogroup off for the run (restored at the end): see bench/scheduler.rs",
            );
        } else if on {
            crate::process::eprintln_status(
                "scheduler autogroup is on and cannot be turned off (not root): tail latencies \
                 may show the kernel's grouping of sessions (see bench/scheduler.rs)",
            );
        }
        Self { restore }
    }
}

impl Drop for OneGroup {
    fn drop(&mut self) {
        if self.restore {
            let _ = std::fs::write(KNOB, "1");
        }
    }
}
