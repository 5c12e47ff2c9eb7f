//! HTTP load with wrk against a release `posture-api serve`.

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, bail};

use super::{Figure, load::Loaded};
use crate::util::{free_port, output};

/// The `POSTURE_SECRET_KEY` of the benchmark's processes.
pub const SECRET_KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

/// A running release server.
pub struct Server {
    child: Child,
    pub base: String,
}

impl Server {
    /// A server; with `redis`, rate limits are shared through it. The limit is set high
    /// enough that the load is never refused: the benchmark measures the check, not 429s.
    pub fn start(bin: &Path, url: &str, redis: Option<&str>) -> anyhow::Result<Self> {
        let port = free_port()?;
        let mut command = Command::new(bin);
        if let Some(redis) = redis {
            command.env("REDIS_URL", redis);
        }
        let child = command
            .arg("serve")
            .env("DATABASE_URL", url)
            .env("POSTURE_RATE_LIMIT", "10000000")
            .env("POSTURE_BIND", format!("127.0.0.1:{port}"))
            .env("POSTURE_SECRET_KEY", SECRET_KEY)
            .env("POSTURE_WEBHOOK_ALLOW_PRIVATE", "true")
            .env("POSTURE_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .context("starting posture-api serve")?;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if std::time::Instant::now() > deadline {
                bail!("posture-api did not start");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak resident memory of the server so far (VmHWM).
    pub fn peak_rss_mib(&self) -> anyhow::Result<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .context("VmHWM")?;
        Ok(kib / 1024.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// What wrk measured.
pub struct Load {
    pub requests_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

fn millis(text: &str) -> Option<f64> {
    let text = text.trim();
    let (number, factor) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (text, 1.0)
    };
    number.trim().parse::<f64>().ok().map(|n| n * factor)
}

/// Runs wrk on one URL with the key; fails if any response was not 2xx.
pub fn wrk(url: &str, key: &str, connections: u32, duration: Duration) -> anyhow::Result<Load> {
    let text = output(Command::new("wrk").args([
        "-t2",
        &format!("-c{connections}"),
        &format!("-d{}s", duration.as_secs()),
        "--latency",
        "-H",
        &format!("Authorization: Bearer {key}"),
        url,
    ]))?;
    if text.contains("Non-2xx") {
        bail!("wrk saw non-2xx responses for {url}:\n{text}");
    }
    let percentile = |p: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(p).and_then(millis))
            .context("wrk latency")
    };
    let requests_per_second = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .context("wrk requests/sec")?;
    Ok(Load {
        requests_per_second,
        p50_ms: percentile("50%")?,
        p99_ms: percentile("99%")?,
    })
}

fn record(figures: &mut Vec<Figure>, name: &str, load: &Load, p99_target: Option<f64>) {
    figures.push(Figure::measure(
        format!("{name}: throughput"),
        load.requests_per_second,
        "req/s",
        false,
    ));
    figures.push(Figure::measure(
        format!("{name}: p50"),
        load.p50_ms,
        "ms",
        true,
    ));
    let p99 = Figure::measure(format!("{name}: p99"), load.p99_ms, "ms", true);
    figures.push(match p99_target {
        Some(t) => p99.target(t),
        None => p99,
    });
}

/// The list routes of the findings API.
pub fn list_routes(
    server: &Server,
    loaded: &Loaded,
    connections: u32,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    for (who, customer) in [
        ("200k-row customer", &loaded.largest),
        ("small customer", &loaded.small),
    ] {
        // A deep offset only where there are that many rows to skip.
        let offsets: &[usize] = if customer.findings > 50_000 {
            &[0, 10_000]
        } else {
            &[0]
        };
        for &offset in offsets {
            let url = format!(
                "{}/api/v1/findings?severity=critical,high&status=open&limit=100&offset={offset}",
                server.base
            );
            let load = wrk(&url, &customer.key, connections, duration)?;
            let name = format!(
                "GET /findings crit+high open, {who} ({} rows), offset {offset}, {connections} conn",
                customer.findings
            );
            record(figures, &name, &load, None);
        }
    }
    Ok(())
}

/// A cheap authenticated route (one tenant), with the server's rate limiter in or out of
/// Redis.
pub fn cheap_route(
    server: &Server,
    loaded: &Loaded,
    label: &str,
    connections: u32,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<Load> {
    let url = format!("{}/api/v1/tenants", server.base);
    let load = wrk(&url, &loaded.small.key, connections, duration)?;
    record(
        figures,
        &format!("GET /tenants (cheap route), rate limits {label}, {connections} conn"),
        &load,
        None,
    );
    Ok(load)
}
