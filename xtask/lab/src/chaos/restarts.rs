//! Scenarios of posture's own connections and processes: the key cache's `LISTEN`
//! connection cut or silently stalled just before a revocation, and an API instance stopped
//! with SIGTERM while requests and exports are in flight.

use std::time::{Duration, Instant};

use super::{
    block_on,
    cluster::{Cluster, Customer},
    outages::wait_for,
    report::Report,
    traffic::{Load, Sample, Summary},
};

/// How long after `keys revoke` returned each instance first answers 401 to the key.
fn revocation_delays(cluster: &Cluster, key: &str) -> anyhow::Result<Vec<Option<Duration>>> {
    let bases = cluster.bases();
    block_on(async {
        let client = reqwest::Client::new();
        let revoked = Instant::now();
        let mut delays = vec![None; bases.len()];
        while revoked.elapsed() < Duration::from_secs(10) && delays.iter().any(Option::is_none) {
            for (i, base) in bases.iter().enumerate() {
                if delays[i].is_some() {
                    continue;
                }
                let status = client
                    .get(format!("{base}/api/v1/identities?limit=1"))
                    .bearer_auth(key)
                    .send()
                    .await
                    .map(|r| r.status().as_u16());
                if status.is_ok_and(|s| s == 401) {
                    delays[i] = Some(revoked.elapsed());
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        delays
    })
}

/// Uses the key on every instance until each serves it from its cache.
fn warm(cluster: &Cluster, key: &str) -> anyhow::Result<()> {
    let bases = cluster.bases();
    block_on(async {
        let client = reqwest::Client::new();
        for _ in 0..5 {
            for base in &bases {
                let r = client
                    .get(format!("{base}/api/v1/identities?limit=1"))
                    .bearer_auth(key)
                    .send()
                    .await?;
                anyhow::ensure!(r.status() == 200, "the new key was refused: {}", r.status());
            }
        }
        Ok(())
    })?
}

fn new_key(cluster: &Cluster, customer: &Customer) -> anyhow::Result<(String, String)> {
    let issued = cluster.cli(&[
        "keys",
        "issue",
        "--customer",
        &customer.id,
        "--scope",
        "read:identities",
    ])?;
    Ok((
        issued["id"].as_str().unwrap_or_default().to_owned(),
        issued["key"].as_str().unwrap_or_default().to_owned(),
    ))
}

fn worst(delays: &[Option<Duration>]) -> Option<Duration> {
    delays
        .iter()
        .try_fold(Duration::ZERO, |worst, d| d.map(|d| worst.max(d)))
}

fn shown(d: Option<Duration>) -> String {
    d.map_or_else(
        || "never (10 s)".to_owned(),
        |d| format!("{} ms", d.as_millis()),
    )
}

const LISTENERS: &str = "FROM pg_stat_activity WHERE application_name = 'posture key cache'";

/// Revocations right after the `LISTEN` connections were cut, and while one was frozen.
pub fn listen_lost(cluster: &mut Cluster, report: &mut Report) -> anyhow::Result<()> {
    const S: &str = "key cache LISTEN lost";
    let customer = cluster.customer("Chaos keys")?;
    let (id, key) = new_key(cluster, &customer)?;
    warm(cluster, &key)?;
    let cut = cluster.count(&format!(
        "SELECT count(pg_terminate_backend(pid)) {LISTENERS}"
    ))?;
    cluster.cli(&["keys", "revoke", &id])?;
    let delays = revocation_delays(cluster, &key)?;
    report.check(S, "LISTEN connections terminated", cut, "2", cut == 2);
    report.check(
        S,
        "cut: revocation to 401 on both instances (worst)",
        shown(worst(&delays)),
        "≤ 1.5 s",
        worst(&delays).is_some_and(|d| d <= Duration::from_millis(1500)),
    );

    wait_for(Duration::from_secs(10), || {
        cluster
            .count(&format!("SELECT count(*) {LISTENERS}"))
            .is_ok_and(|n| n == 2)
    });
    let (id, key) = new_key(cluster, &customer)?;
    warm(cluster, &key)?;
    let ports = cluster.psql(&format!(
        "SELECT string_agg(client_port::text, ',') {LISTENERS}"
    ))?;
    let frozen = ports
        .split(',')
        .filter_map(|p| p.parse().ok())
        .filter(|&p| cluster.proxy.freeze_upstream_port(p))
        .count();
    cluster.cli(&["keys", "revoke", &id])?;
    let delays = revocation_delays(cluster, &key)?;
    cluster.proxy.set_all_frozen(false);
    report.check(
        S,
        "LISTEN connections frozen (instance 1, through the proxy)",
        frozen,
        "1",
        frozen == 1,
    );
    report.check(
        S,
        "frozen: revocation to 401 on the frozen instance",
        shown(delays[1]),
        "≤ 1.5 s (+ 0.1 s of polling)",
        delays[1].is_some_and(|d| d <= Duration::from_millis(1600)),
    );
    report.info(
        S,
        "frozen: revocation to 401 on the other instance",
        shown(delays[0]),
    );
    Ok(())
}

/// What a slowly read NDJSON export delivered: (status, lines, lines that parse).
async fn slow_export(base: String, key: String) -> (u16, usize, usize) {
    let Ok(response) = reqwest::Client::new()
        .get(format!("{base}/api/v1/findings/export"))
        .bearer_auth(key)
        .send()
        .await
    else {
        return (0, 0, 0);
    };
    let status = response.status().as_u16();
    let mut response = response;
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let text = String::from_utf8_lossy(&body);
    let lines: Vec<&str> = text.split_terminator('\n').collect();
    let parsed = lines
        .iter()
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
        .count();
    (status, lines.len(), parsed)
}

/// Instance 0 stopped with SIGTERM while it serves reads and four slowly read exports.
pub fn api_sigterm(cluster: &mut Cluster, report: &mut Report) -> anyhow::Result<()> {
    const S: &str = "posture-api SIGTERM under load";
    let reader = cluster.reader("term")?;
    let base = cluster.bases()[0].clone();
    let load = Load::start(std::slice::from_ref(&base), &reader.key, 6);
    std::thread::sleep(Duration::from_secs(2));
    let exports: Vec<_> = (0..4)
        .map(|_| {
            let (base, key) = (base.clone(), reader.key.clone());
            std::thread::spawn(move || block_on(slow_export(base, key)))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let term = load.now();
    let stopping = Instant::now();
    cluster.signal_api(0, "TERM")?;
    let exited = stopping.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let samples = load.stop();
    let before: Vec<_> = samples.iter().filter(|s| s.sent < term).collect();
    let summary = Summary::of(before.iter().copied());
    // actix-http drains a connection on SIGTERM by finishing the request it is serving and
    // closing it after the response; an idle keep-alive connection is closed at once, so a
    // request the client wrote into it just then is never started (HTTP/1.1's keep-alive
    // race: RFC 9112 §9.3.1 lets clients retry such idempotent requests, as nginx and
    // ingress controllers do on another instance). Any other failure is a request broken.
    let unstarted = |s: &&&Sample| {
        !s.began
            && s.error
                .as_deref()
                .is_some_and(|e| e.contains("connection closed before message completed"))
    };
    let never_started = before.iter().filter(unstarted).count();
    let broken: Vec<&&Sample> = before
        .iter()
        .filter(|s| s.status.is_none() && !unstarted(s))
        .collect();
    report.info(S, "requests sent before SIGTERM", summary.requests);
    report.info(
        S,
        "their responses per status",
        format!("{:?}", summary.statuses),
    );
    report.check(
        S,
        "of those, started and not answered in full",
        broken.len(),
        "0",
        broken.is_empty() && summary.other_errors == 0,
    );
    report.info(
        S,
        "of those, closed unstarted on an idle keep-alive connection (retriable)",
        never_started,
    );
    for s in broken {
        report.info(
            S,
            "broken",
            format!(
                "sent {} ms before SIGTERM: {}",
                (term - s.sent).as_millis(),
                s.error.as_deref().unwrap_or("")
            ),
        );
    }
    let mut complete = 0;
    for export in exports {
        let (status, lines, parsed) = export
            .join()
            .map_err(|_| anyhow::anyhow!("export thread"))??;
        complete += usize::from(status == 200 && lines == 2000 && parsed == 2000);
    }
    report.check(
        S,
        "exports in flight that ended whole (2,000 lines)",
        complete,
        "4 of 4",
        complete == 4,
    );
    report.check(
        S,
        "time to exit",
        format!("{:.1} s", exited.as_secs_f64()),
        "≤ 10 s (shutdown timeout)",
        exited <= Duration::from_secs(11),
    );
    cluster.start_api(0)?;
    Ok(())
}
