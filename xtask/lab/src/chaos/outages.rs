//! Scenarios of the backing services: PostgreSQL stopped under load (with an ingest in
//! flight), PostgreSQL's connections exhausted by another client, Redis killed. The
//! promise: a clear 503 with `Retry-After` (never a 500, never a hang), nothing half
//! written, and service back on its own when the backing service is.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use super::{
    Context, EVERY_EVENT,
    cluster::{Cluster, ROLE},
    deliveries::deliver_one_pass,
    report::{Report, secs},
    traffic::{Load, Sample, Summary, recovery_after},
};

/// Requests during an outage wait at most the pool's acquire timeout (5 s), plus slack.
const OUTAGE_LATENCY_BOUND: Duration = Duration::from_secs(6);
/// Service is back this soon after the backing service is.
const RECOVERY_BOUND: Duration = Duration::from_secs(5);

fn during(samples: &[Sample], from: Duration, to: Duration) -> Summary {
    Summary::of(samples.iter().filter(|s| s.sent >= from && s.sent <= to))
}

/// Checks shared by the outages: the answers while it lasted, and the recovery after.
fn outage_checks(
    report: &mut Report,
    scenario: &'static str,
    samples: &[Sample],
    (down, up): (Duration, Duration),
    instances: usize,
) {
    let outage = during(samples, down, up);
    let all = Summary::of(samples);
    report.info(
        scenario,
        "requests in all (during the outage)",
        format!("{} ({})", all.requests, outage.requests),
    );
    report.info(
        scenario,
        "responses per status",
        format!("{:?}", all.statuses),
    );
    report.check(
        scenario,
        "503 during the outage, without Retry-After",
        format!(
            "{} of {}",
            outage.unavailable_without_retry_after, outage.unavailable
        ),
        "0 without",
        outage.unavailable_without_retry_after == 0,
    );
    report.check(
        scenario,
        "500s and other errors",
        all.other_errors,
        "0",
        all.other_errors == 0,
    );
    report.check(
        scenario,
        "requests without a response",
        all.no_response,
        "0",
        all.no_response == 0,
    );
    report.check(
        scenario,
        "slowest answer during the outage",
        secs(outage.max_latency),
        "≤ 6 s (the pool's acquire timeout)",
        outage.max_latency <= OUTAGE_LATENCY_BOUND,
    );
    for instance in 0..instances {
        let mine: Vec<Sample> = samples
            .iter()
            .filter(|s| s.instance == instance)
            .cloned()
            .collect();
        let recovery = recovery_after(&mine, up);
        report.check(
            scenario,
            &format!("instance {instance}: back to 200 after the service returned"),
            recovery.map_or_else(|| "never".to_owned(), secs),
            "≤ 5 s",
            recovery.is_some_and(|r| r <= RECOVERY_BOUND),
        );
    }
}

/// PostgreSQL stopped for 10 s while both instances serve reads and an ingest is writing.
pub fn postgres_down(
    cluster: &mut Cluster,
    cx: &Context,
    report: &mut Report,
) -> anyhow::Result<()> {
    const S: &str = "PostgreSQL down 10 s";
    let reader = cluster.reader("pg")?;
    let ingesting = cluster.customer("Chaos ingest")?;
    let resume = cluster.customer("Chaos resume")?;
    cx.subscribe(&resume, "resume", EVERY_EVENT)?;
    let file = cluster.pass_file(&ingesting.tenant, "big", 30_000)?;
    let file = file.to_str().unwrap_or_default().to_owned();
    let load = Load::start(&cluster.bases(), &reader.key, 4);
    std::thread::sleep(Duration::from_secs(2));
    let mut ingest = cluster.spawn_cli(&["ingest", "--customer", &ingesting.id, &file])?;
    let in_flight = wait_for(Duration::from_secs(60), || {
        cluster
            .count("SELECT count(*) FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()")
            .is_ok_and(|n| n > 0)
    });
    let down = load.now();
    cluster.postgres.stop();
    std::thread::sleep(Duration::from_secs(10));
    cluster.postgres.restart()?;
    let up = load.now();
    let ingest_failed = !ingest.wait()?.success();
    std::thread::sleep(Duration::from_secs(10));
    let samples = load.stop();
    outage_checks(report, S, &samples, (down, up), 2);

    report.check(
        S,
        "an ingest was writing when PostgreSQL stopped",
        in_flight,
        "true",
        in_flight,
    );
    report.check(
        S,
        "that ingest failed",
        ingest_failed,
        "true",
        ingest_failed,
    );
    let left = cluster.rows_left(&ingesting)?;
    report.check(S, "rows it left behind", left, "0", left == 0);
    let (rerun, findings) = cluster.ingest_again(&ingesting, &file)?;
    report.check(
        S,
        "the same ingest run again: findings",
        findings,
        "30000",
        rerun && findings == 30_000,
    );
    let (queued, took) = deliver_one_pass(cluster, &resume, "resume")?;
    report.check(
        S,
        "the workers deliver a new pass after the outage",
        format!("{queued} in {}", secs(took)),
        "4 delivered",
        queued == 4,
    );
    Ok(())
}

/// PostgreSQL refuses posture every new connection (SQLSTATE 53300, as when another
/// client holds every slot) and posture's open ones are cut, for 10 s.
pub fn connections_exhausted(cluster: &mut Cluster, report: &mut Report) -> anyhow::Result<()> {
    const S: &str = "PostgreSQL connections exhausted 10 s";
    let reader = cluster.reader("conn")?;
    let load = Load::start(&cluster.bases(), &reader.key, 4);
    std::thread::sleep(Duration::from_secs(2));
    let down = load.now();
    // A role's connection limit gives the same error as a full server, without racing
    // posture for the slots its cut connections free.
    cluster.psql(&format!("ALTER ROLE {ROLE} CONNECTION LIMIT 0"))?;
    let cut = cluster.count(&format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = '{ROLE}'"
    ))?;
    std::thread::sleep(Duration::from_secs(10));
    let refused = !cluster.cli_succeeds(&["customers", "list"]);
    cluster.psql(&format!("ALTER ROLE {ROLE} CONNECTION LIMIT -1"))?;
    let up = load.now();
    std::thread::sleep(Duration::from_secs(8));
    let samples = load.stop();
    report.info(S, "posture connections cut", cut);
    report.check(
        S,
        "new connections were refused throughout",
        refused,
        "true",
        refused,
    );
    report.info(
        S,
        "503 answers during the outage",
        during(&samples, down, up).unavailable,
    );
    outage_checks(report, S, &samples, (down, up), 2);
    Ok(())
}

/// Redis killed for 5 s under load, then started again (empty).
pub fn redis_down(cluster: &mut Cluster, report: &mut Report) -> anyhow::Result<()> {
    const S: &str = "Redis down 5 s";
    let reader = cluster.reader("redis")?;
    let load = Load::start(&cluster.bases(), &reader.key, 4);
    std::thread::sleep(Duration::from_secs(3));
    let down = load.now();
    cluster.redis.stop();
    std::thread::sleep(Duration::from_secs(5));
    cluster.redis.restart()?;
    let up = load.now();
    std::thread::sleep(Duration::from_secs(6));
    let samples = load.stop();
    let all = Summary::of(&samples);
    let outage = during(&samples, down, up);
    report.info(
        S,
        "requests in all (during the outage)",
        format!("{} ({})", all.requests, outage.requests),
    );
    report.info(S, "responses per status", format!("{:?}", all.statuses));
    report.check(
        S,
        "requests not answered 200",
        all.requests - all.ok,
        "0 (limits counted per instance meanwhile)",
        all.ok == all.requests,
    );
    report.check(
        S,
        "slowest answer",
        secs(all.max_latency),
        "≤ 1 s",
        all.max_latency <= Duration::from_secs(1),
    );
    let keys = crate::process::output(Command::new("redis-cli").args([
        "-u",
        &cluster.redis.url(),
        "DBSIZE",
    ]))?;
    let keys: i64 = keys.trim().parse().unwrap_or(0);
    report.check(
        S,
        "counters in Redis again after it returned",
        keys,
        "> 0 (shared counting resumed)",
        keys > 0,
    );
    Ok(())
}

/// Polls `condition` every 20 ms until it holds (true) or `limit` passes (false).
pub fn wait_for(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
