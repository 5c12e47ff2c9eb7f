//! CPU time per request (docs/performance.md, "Overhead per request"): the user + system
//! time `posture-api` and PostgreSQL's processes spent over a measured run, from
//! `/proc/<pid>/stat`, divided by the requests the run served.

use std::path::Path;

use anyhow::Context as _;

/// Clock ticks per second of `/proc/<pid>/stat`'s times (`getconf CLK_TCK`; 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// The CPU seconds (user + system) a process has used, and its parent's pid.
fn stat(pid: u32) -> Option<(f64, u32)> {
    stat_with_reaped(pid).map(|(own, _, ppid)| (own, ppid))
}

/// The CPU seconds a process has used, those of its children it has waited for (exited
/// backends, for a postmaster), and its parent's pid.
fn stat_with_reaped(pid: u32) -> Option<(f64, f64, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields follow the last ')'.
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    // Relative to field 3 (state): ppid is field 4, utime 14 and stime 15.
    let ppid = fields.get(1)?.parse().ok()?;
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // cutime and cstime, fields 16 and 17.
    let cutime: f64 = fields.get(13)?.parse().ok()?;
    let cstime: f64 = fields.get(14)?.parse().ok()?;
    Some((
        (utime + stime) / TICKS_PER_SECOND,
        (cutime + cstime) / TICKS_PER_SECOND,
        ppid,
    ))
}

/// The CPU seconds a process has used.
pub fn process_seconds(pid: u32) -> anyhow::Result<f64> {
    stat(pid)
        .map(|(seconds, _)| seconds)
        .with_context(|| format!("reading /proc/{pid}/stat"))
}

/// The pid of the postmaster of the cluster in `data` (first line of `postmaster.pid`).
pub fn postmaster_pid(data: &Path) -> anyhow::Result<u32> {
    let text = std::fs::read_to_string(data.join("postmaster.pid"))
        .with_context(|| format!("reading {}/postmaster.pid", data.display()))?;
    text.lines()
        .next()
        .and_then(|line| line.trim().parse().ok())
        .context("postmaster.pid has no pid")
}

/// The CPU seconds the postmaster and its children (backends, background workers) have
/// used: the live ones, and those that exited (the postmaster waits for each, which adds
/// its time to the postmaster's children's).
pub fn cluster_seconds(postmaster: u32) -> anyhow::Result<f64> {
    // The postmaster first, then its live children: a child reaped in between is missed (a
    // tick at most), where the other order would count it twice.
    let (own, reaped, _) =
        stat_with_reaped(postmaster).with_context(|| format!("reading /proc/{postmaster}/stat"))?;
    let mut total = own + reaped;
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some((seconds, ppid)) = stat(pid)
            && ppid == postmaster
        {
            total += seconds;
        }
    }
    Ok(total)
}

/// CPU seconds of `posture-api` and of the cluster, read together.
#[derive(Clone, Copy)]
pub struct CpuSample {
    api: f64,
    database: f64,
}

impl CpuSample {
    pub fn take(api_pid: u32, postmaster: u32) -> anyhow::Result<Self> {
        Ok(Self {
            api: process_seconds(api_pid)?,
            database: cluster_seconds(postmaster)?,
        })
    }

    /// Microseconds of CPU per request of each side since `earlier`, over `requests`.
    pub fn per_request_since(&self, earlier: &CpuSample, requests: f64) -> (f64, f64) {
        let per = |now: f64, then: f64| (now - then).max(0.0) * 1e6 / requests.max(1.0);
        (
            per(self.api, earlier.api),
            per(self.database, earlier.database),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_cpu_time_and_a_parent() {
        let (seconds, ppid) = stat(std::process::id()).unwrap();
        assert!(seconds >= 0.0);
        assert!(ppid > 0);
    }
}
