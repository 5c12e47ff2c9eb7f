//! HTTP load with wrk against a release `posture-api serve`.

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, bail};

use super::{
    Figure,
    cpu::CpuSample,
    load::Loaded,
    peer::Peer,
    scenarios::{PeerRequest, peer_answers, scenarios},
    sql,
};
use crate::{
    process::{output, psql_value},
    servers::free_port,
};

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
    pub fn start(
        bin: &Path,
        url: &str,
        redis: Option<&str>,
        pool_size: Option<u32>,
    ) -> anyhow::Result<Self> {
        Self::start_with(bin, url, redis, pool_size, &[])
    }

    /// [`Server::start`] with more settings (`env`).
    pub fn start_with(
        bin: &Path,
        url: &str,
        redis: Option<&str>,
        pool_size: Option<u32>,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let port = free_port()?;
        let mut command = Command::new(bin);
        command.envs(env.iter().copied());
        if let Some(redis) = redis {
            command.env("REDIS_URL", redis);
        }
        if let Some(size) = pool_size {
            command.env("POSTURE_DB_POOL_SIZE", size.to_string());
        }
        let child = command
            .arg("serve")
            .env("DATABASE_URL", url)
            .env("POSTURE_RATE_LIMIT", "10000000")
            .env("POSTURE_TOKEN_RATE_LIMIT", "10000000")
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

impl Load {
    /// The mean of two runs (throughput and each percentile).
    pub fn mean(a: &Load, b: &Load) -> Load {
        Load {
            requests_per_second: (a.requests_per_second + b.requests_per_second) / 2.0,
            p50_ms: (a.p50_ms + b.p50_ms) / 2.0,
            p99_ms: (a.p99_ms + b.p99_ms) / 2.0,
        }
    }
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
    wrk_with(
        url,
        &[format!("Authorization: Bearer {key}")],
        connections,
        duration,
    )
}

/// Runs wrk on one URL with these request headers; fails if any response was not 2xx.
pub fn wrk_with(
    url: &str,
    headers: &[String],
    connections: u32,
    duration: Duration,
) -> anyhow::Result<Load> {
    let mut command = Command::new("wrk");
    command.args([
        "-t2",
        &format!("-c{connections}"),
        &format!("-d{}s", duration.as_secs()),
        "--latency",
    ]);
    for header in headers {
        command.arg("-H").arg(header);
    }
    measured(command.arg(url), url)
}

/// Runs wrk on one URL with a Lua `script` (its `args` after `--`), which makes each
/// request; fails if any response was not 2xx.
pub fn wrk_scripted(
    url: &str,
    script: &Path,
    args: &[&str],
    connections: u32,
    duration: Duration,
) -> anyhow::Result<Load> {
    let mut command = Command::new("wrk");
    command
        .args([
            "-t2",
            &format!("-c{connections}"),
            &format!("-d{}s", duration.as_secs()),
            "--latency",
            "-s",
        ])
        .arg(script)
        .arg(url)
        .arg("--")
        .args(args);
    measured(&mut command, url)
}

/// What a wrk run (`command`, loading `url`) reports.
fn measured(command: &mut Command, url: &str) -> anyhow::Result<Load> {
    let text = output(command)?;
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

pub fn record(figures: &mut Vec<Figure>, name: &str, load: &Load, p99_target: Option<f64>) {
    figures.push(Figure::measure(
        format!("{name}: throughput"),
        load.requests_per_second,
        "req/s",
        false,
    ));
    record_latency(figures, name, load, p99_target);
}

fn record_latency(figures: &mut Vec<Figure>, name: &str, load: &Load, p99_target: Option<f64>) {
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

/// How long each route is loaded before it is measured.
const WARM_UP: Duration = Duration::from_secs(2);

/// The read routes under wrk, each against the pgbench throughput of its SQL at the same
/// concurrency, and against PostgREST doing the same work when `peer` runs.
#[expect(
    clippy::too_many_arguments,
    reason = "the bench's one call site names each"
)]
pub fn read_routes(
    server: &Server,
    peer: Option<&Peer>,
    database_url: &str,
    postmaster: u32,
    loaded: &Loaded,
    connections: u32,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let detail_id = detail_id(database_url, loaded)?;
    for (i, scenario) in scenarios(loaded, &detail_id).into_iter().enumerate() {
        let url = format!("{}{}", server.base, scenario.path);
        let name = format!("{}, {connections} conn", scenario.name);
        let mut vars = vec![
            ("c", scenario.customer.id.clone()),
            ("h", format!("\\x{}", scenario.customer.key_hash)),
        ];
        vars.extend(scenario.vars.iter().cloned());
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let key = &scenario.customer.key;
        let baseline = |j: usize| {
            sql::pgbench(
                database_url,
                &format!("route-{i}-{j}"),
                &scenario.baselines[j].script,
                &vars,
                connections,
                duration,
            )
        };
        // Unmeasured warm-up: connections opened, statements prepared, pages cached.
        wrk(&url, key, connections, WARM_UP)?;
        // Mirrored order (route, baselines, baselines reversed, route): a drift of the
        // machine during the scenario favours neither side. Each figure is the mean of two.
        let measured = || -> anyhow::Result<(Load, (f64, f64))> {
            let before = CpuSample::take(server.pid(), postmaster)?;
            let load = wrk(&url, key, connections, duration)?;
            let requests = load.requests_per_second * duration.as_secs_f64();
            let cpu =
                CpuSample::take(server.pid(), postmaster)?.per_request_since(&before, requests);
            Ok((load, cpu))
        };
        // The same read through PostgREST, with the customer's key.
        let peer_run = |peer: &Peer, request: &PeerRequest, duration: Duration| {
            let mut headers = request.headers.clone();
            headers.push(format!("X-Api-Key: {key}"));
            wrk_with(
                &format!("{}{}", peer.base, request.path),
                &headers,
                connections,
                duration,
            )
        };
        let peer = peer
            .zip(scenario.peer.as_ref())
            .filter(|(peer, request)| peer_answers(peer, request, key));
        if let Some((peer, request)) = peer {
            peer_run(peer, request, WARM_UP)?;
        }
        let (first, first_cpu) = measured()?;
        let mut tps = vec![0.0; scenario.baselines.len()];
        for (j, sum) in tps.iter_mut().enumerate() {
            *sum += baseline(j)?;
        }
        let mut peer_rps = 0.0;
        if let Some((peer, request)) = peer {
            peer_rps += peer_run(peer, request, duration)?.requests_per_second;
            peer_rps += peer_run(peer, request, duration)?.requests_per_second;
        }
        for (j, sum) in tps.iter_mut().enumerate().rev() {
            *sum += baseline(j)?;
        }
        let (second, second_cpu) = measured()?;
        let load = Load::mean(&first, &second);
        let api_cpu = (first_cpu.0 + second_cpu.0) / 2.0;
        let database_cpu = (first_cpu.1 + second_cpu.1) / 2.0;
        figures.push(
            Figure::measure(
                format!("{name}: posture-api CPU per request"),
                api_cpu,
                "µs",
                true,
            )
            .against(
                database_cpu,
                "PostgreSQL's CPU for the same requests",
                scenario.cpu_target.filter(|_| connections == 16),
            ),
        );
        figures.push(Figure::measure(
            format!("{name}: PostgreSQL CPU per request"),
            database_cpu,
            "µs",
            true,
        ));
        let compared = scenario
            .baselines
            .iter()
            .zip(tps)
            .map(|(baseline, sum)| (sum / 2.0, baseline.name, baseline.target))
            .chain(peer.map(|_| (peer_rps / 2.0, "PostgREST doing the same work", None)));
        for (against, baseline, target) in compared {
            figures.push(
                Figure::measure(
                    format!("{name}: throughput"),
                    load.requests_per_second,
                    "req/s",
                    false,
                )
                .against(against, baseline, target),
            );
        }
        let p99_target = scenario.p99_target.filter(|_| connections == 16);
        record_latency(figures, &name, &load, p99_target);
    }
    Ok(())
}

/// The finding the detail route reads: the largest customer's 1,001st by id.
pub fn detail_id(database_url: &str, loaded: &Loaded) -> anyhow::Result<String> {
    psql_value(
        database_url,
        &format!(
            "SELECT id FROM findings WHERE customer_id = '{}' ORDER BY id OFFSET {} LIMIT 1",
            loaded.largest.id,
            // The 1,001st, or the middle one of a smaller customer (a smoke run's).
            (loaded.largest.findings / 2).min(1000)
        ),
    )
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
