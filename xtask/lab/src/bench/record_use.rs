//! What recording the credentials' use costs (docs/performance.md, "Credentials"): a small
//! list read on the benchmark's server, which records each key's last use (when, from where,
//! with what client; a write a minute per key and address, off the request path), against
//! the same read on a second server with `POSTURE_RECORD_USE=off`. Target: at least 0.98
//! of it. Runs alternate between the two, so drift of the machine falls on both.

use std::{path::Path, time::Duration};

use super::{
    Figure,
    http::{Load, Server, record, wrk},
    load::Loaded,
};

const CONNECTIONS: u32 = 16;

pub(super) fn run(
    bin: &Path,
    server: &Server,
    database_url: &str,
    loaded: &Loaded,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let off = Server::start_with(
        bin,
        database_url,
        None,
        None,
        &[("POSTURE_RECORD_USE", "off")],
    )?;
    let path = "/api/v1/findings?limit=10";
    let (on_url, off_url) = (
        format!("{}{path}", server.base),
        format!("{}{path}", off.base),
    );
    let warm = Duration::from_secs(2);
    wrk(&on_url, &loaded.small.key, CONNECTIONS, warm)?;
    wrk(&off_url, &loaded.small.key, CONNECTIONS, warm)?;
    let mut runs: Vec<(Load, Load)> = Vec::new();
    for _ in 0..2 {
        let recording = wrk(&on_url, &loaded.small.key, CONNECTIONS, duration)?;
        let not = wrk(&off_url, &loaded.small.key, CONNECTIONS, duration)?;
        runs.push((recording, not));
    }
    let recording = Load::mean(&runs[0].0, &runs[1].0);
    let not = Load::mean(&runs[0].1, &runs[1].1);
    let name = format!("GET /findings?limit=10 recording the key's use, {CONNECTIONS} conn");
    figures.push(
        Figure::measure(
            format!("{name}: throughput"),
            recording.requests_per_second,
            "req/s",
            false,
        )
        .against(
            not.requests_per_second,
            "the same with POSTURE_RECORD_USE=off",
            Some(0.98),
        ),
    );
    record(
        figures,
        &format!("GET /findings?limit=10 with POSTURE_RECORD_USE=off, {CONNECTIONS} conn"),
        &not,
        None,
    );
    Ok(())
}
