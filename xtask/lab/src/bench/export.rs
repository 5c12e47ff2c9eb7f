//! The findings export of the largest customer, against `psql \copy` of the same rows, and
//! its OCSF form against the NDJSON one.

use std::{
    io::Read as _,
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{Figure, http::Server, load::Customer};

/// Bytes and seconds of reading a command's stdout to the end.
pub(super) fn drain(mut command: Command) -> anyhow::Result<(u64, f64)> {
    let started = Instant::now();
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut out = child.stdout.take().context("stdout")?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = out.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
    }
    let status = child.wait()?;
    anyhow::ensure!(status.success(), "{command:?} failed");
    Ok((bytes, started.elapsed().as_secs_f64()))
}

/// The run with the median time of three.
fn median_of_three(command: impl Fn() -> Command) -> anyhow::Result<(u64, f64)> {
    let mut runs = (0..3)
        .map(|_| drain(command()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    runs.sort_by(|a, b| a.1.total_cmp(&b.1));
    Ok(runs[1])
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .map(str::to_owned)
        })
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

pub fn run(
    server: &Server,
    database_url: &str,
    customer: &Customer,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let curl_format = |format: &str| {
        let mut command = Command::new("curl");
        command
            .args(["-sS", "--fail", "-H"])
            .arg(format!("Authorization: Bearer {}", customer.key))
            .arg(format!(
                "{}/api/v1/findings/export?format={format}",
                server.base
            ));
        command
    };
    let curl = || curl_format("ndjson");
    let psql = || {
        let mut command = Command::new("psql");
        command.arg(database_url).arg("-qc").arg(format!(
            "\\copy (select row_to_json(f) from findings f where customer_id = '{}') to stdout",
            customer.id
        ));
        command
    };
    // Warm both paths (caches), then take the median of three runs of each.
    drain(curl())?;
    drain(psql())?;
    let (copy_bytes, copy_secs) = median_of_three(psql)?;

    let pid = server.pid();
    let idle = rss_kib(pid);
    let peak = Arc::new(AtomicU64::new(idle));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let (api_bytes, api_secs) = median_of_three(curl)?;
    done.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let peak = peak.load(Ordering::Relaxed);
    drain(curl_format("ocsf"))?;
    let (_, ocsf_secs) = median_of_three(|| curl_format("ocsf"))?;

    let rows = customer.findings as f64;
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    figures.push(
        Figure::measure(
            format!(
                "export NDJSON, {} findings of one customer",
                customer.findings
            ),
            rows / api_secs,
            "rows/s",
            false,
        )
        .against(
            rows / copy_secs,
            "psql \\copy (select row_to_json(f) ...)",
            Some(0.9),
        ),
    );
    figures.push(
        Figure::measure(
            format!(
                "export OCSF (Detection Finding events), {} findings of one customer",
                customer.findings
            ),
            rows / ocsf_secs,
            "rows/s",
            false,
        )
        .against(rows / api_secs, "the NDJSON export", Some(0.8)),
    );
    figures.push(
        Figure::measure(
            "export NDJSON throughput",
            mib(api_bytes) / api_secs,
            "MiB/s",
            false,
        )
        .against(
            mib(copy_bytes) / copy_secs,
            "psql \\copy (row_to_json) MiB/s",
            None,
        ),
    );
    figures.push(
        Figure::measure(
            "posture-api RSS growth during the export (peak - idle)",
            peak.saturating_sub(idle) as f64 / 1024.0,
            "MiB",
            true,
        )
        .target(16.0),
    );
    figures.push(
        Figure::measure(
            "posture-api peak RSS during the export",
            peak as f64 / 1024.0,
            "MiB",
            true,
        )
        .target(100.0),
    );
    Ok(())
}
