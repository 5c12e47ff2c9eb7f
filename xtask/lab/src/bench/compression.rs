//! What response compression saves and costs (docs/performance.md, "Compression"): the
//! largest customer's NDJSON export as sent (identity, gzip, zstd: bytes on the wire and
//! rows/s), and the small-customer list with and without `Accept-Encoding: gzip`
//! (throughput and posture-api's CPU per request), measured in mirrored order.

use std::{process::Command, time::Duration};

use super::{
    Figure,
    cpu::CpuSample,
    export::drain,
    http::{Server, wrk_with},
    load::Loaded,
};

/// The small customer's first page of open critical and high findings (as in
/// `scenarios.rs`).
const LIST: &str = "/api/v1/findings?severity=critical,high&status=open&limit=100&offset=0";

pub fn run(
    server: &Server,
    postmaster: u32,
    loaded: &Loaded,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    export(server, loaded, figures)?;
    list(server, postmaster, loaded, duration, figures)
}

/// The export as each encoding sends it: bytes on the wire (curl without `--compressed`
/// keeps them as sent) and the median time of three.
fn export(server: &Server, loaded: &Loaded, figures: &mut Vec<Figure>) -> anyhow::Result<()> {
    let customer = &loaded.largest;
    let curl = |encoding: &str| {
        let mut command = Command::new("curl");
        command
            .args(["-sS", "--fail", "-H"])
            .arg(format!("Authorization: Bearer {}", customer.key))
            .arg("-H")
            .arg(format!("Accept-Encoding: {encoding}"))
            .arg(format!("{}/api/v1/findings/export", server.base));
        command
    };
    let median = |encoding: &str| -> anyhow::Result<(u64, f64)> {
        drain(curl(encoding))?;
        let mut runs = (0..3)
            .map(|_| drain(curl(encoding)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        runs.sort_by(|a, b| a.1.total_cmp(&b.1));
        Ok(runs[1])
    };
    let rows = customer.findings as f64;
    let (plain_bytes, plain_secs) = median("identity")?;
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    figures.push(Figure::measure(
        format!(
            "export NDJSON, {} rows, identity: bytes on the wire",
            customer.findings
        ),
        mib(plain_bytes),
        "MiB",
        true,
    ));
    for encoding in ["gzip", "zstd"] {
        let (bytes, secs) = median(encoding)?;
        figures.push(
            Figure::measure(
                format!(
                    "export NDJSON, {} rows, {encoding}: bytes on the wire",
                    customer.findings
                ),
                mib(bytes),
                "MiB",
                true,
            )
            .against(mib(plain_bytes), "identity", None),
        );
        figures.push(
            Figure::measure(
                format!(
                    "export NDJSON, {} rows, {encoding}: throughput",
                    customer.findings
                ),
                rows / secs,
                "rows/s",
                false,
            )
            .against(rows / plain_secs, "identity", None),
        );
    }
    Ok(())
}

/// The list with and without gzip: plain, gzip, gzip, plain, each figure the mean of two.
fn list(
    server: &Server,
    postmaster: u32,
    loaded: &Loaded,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let url = format!("{}{LIST}", server.base);
    let auth = format!("Authorization: Bearer {}", loaded.small.key);
    let run = |gzip: bool| -> anyhow::Result<(f64, f64)> {
        let mut headers = vec![auth.clone()];
        if gzip {
            headers.push("Accept-Encoding: gzip".into());
        }
        let before = CpuSample::take(server.pid(), postmaster)?;
        let load = wrk_with(&url, &headers, 16, duration)?;
        let requests = load.requests_per_second * duration.as_secs_f64();
        let (api, _) =
            CpuSample::take(server.pid(), postmaster)?.per_request_since(&before, requests);
        Ok((load.requests_per_second, api))
    };
    wrk_with(
        &url,
        &[auth.clone(), "Accept-Encoding: gzip".into()],
        16,
        Duration::from_secs(2),
    )?;
    let plain_first = run(false)?;
    let gzip_first = run(true)?;
    let gzip_second = run(true)?;
    let plain_second = run(false)?;
    let mean = |a: (f64, f64), b: (f64, f64)| ((a.0 + b.0) / 2.0, (a.1 + b.1) / 2.0);
    let (plain_rps, plain_cpu) = mean(plain_first, plain_second);
    let (gzip_rps, gzip_cpu) = mean(gzip_first, gzip_second);
    let name = format!(
        "GET /findings crit+high open, small customer ({} rows), 16 conn, gzip",
        loaded.small.findings
    );
    figures.push(
        Figure::measure(format!("{name}: throughput"), gzip_rps, "req/s", false).against(
            plain_rps,
            "without Accept-Encoding",
            None,
        ),
    );
    figures.push(
        Figure::measure(
            format!("{name}: posture-api CPU per request"),
            gzip_cpu,
            "µs",
            true,
        )
        .against(plain_cpu, "without Accept-Encoding", None),
    );
    Ok(())
}
