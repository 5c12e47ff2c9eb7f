//! Losing the PostgreSQL primary for good, under load: a Patroni cluster of three members
//! (`patroni.rs`), posture-api ×2 and posture-worker ×2 whose `DATABASE_URL` names every
//! member with `target_session_attrs=read-write` (and each member as a read replica), reads
//! on both instances, writes (webhook subscriptions created and deleted), deliveries in
//! flight to a slow receiver and an ingest writing. Then the leader's machine is lost (its
//! Patroni and postmaster killed with `kill -9`: Patroni promotes a replica once the
//! leader's lock expires), or the leader is switched over by `patronictl`. Measured: the
//! seconds without service (503 with `Retry-After` only, never a 500 nor a request without
//! an answer), acknowledged writes lost, the ingest failed whole and run again, deliveries
//! lost or duplicated, and a revocation after the failover reaching both instances.

use std::time::{Duration, Instant};

use super::{
    Context, EVERY_EVENT,
    cluster::{Cluster, Customer},
    patroni::{Patroni, TTL_SECS},
    receiver::Behaviour,
    report::{Report, secs},
    subscriptions::start_writing,
    traffic::{Load, Summary, recovery_after},
};

/// Deliveries queued just before the loss: this many findings (100 a delivery, per event
/// type), to each of [`HOOKS`], answered in [`RECEIVER_DELAY`]: still in flight at the loss.
const DELIVERY_FINDINGS: usize = 2_000;
const RECEIVER_DELAY: Duration = Duration::from_millis(300);
const HOOKS: usize = 5;
/// Findings of the ingest in flight at the loss.
const INGEST_FINDINGS: usize = 30_000;

/// One run of a scenario.
#[derive(Clone, Copy)]
pub struct How {
    pub loss: Loss,
    pub synchronous: bool,
    /// Its number (the receiver's endpoints are per run).
    pub run: usize,
}

/// How the primary goes.
#[derive(Clone, Copy)]
pub enum Loss {
    /// Its machine is lost: Patroni and the postmaster killed.
    Killed,
    /// A planned `patronictl switchover`.
    Switchover,
}

/// Revokes the key of `customer` (its only one) with the operator's command.
pub(super) fn revoke(cluster: &Cluster, customer: &Customer) -> anyhow::Result<()> {
    let listed = cluster.cli(&["keys", "list", "--customer", &customer.id])?;
    let key_id = listed["data"][0]["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("the key's id in {listed}"))?;
    cluster.cli(&["keys", "revoke", &key_id])?;
    Ok(())
}

/// How long until `key` is refused (401) by every instance, within `bound`.
pub(super) fn refused_everywhere(
    bases: &[String],
    key: &str,
    bound: Duration,
) -> anyhow::Result<Option<Duration>> {
    let started = Instant::now();
    super::block_on(async {
        let http = reqwest::Client::new();
        loop {
            let mut all = true;
            for base in bases {
                let status = http
                    .get(format!("{base}/api/v1/findings"))
                    .bearer_auth(key)
                    .send()
                    .await
                    .map(|r| r.status().as_u16());
                all &= status.is_ok_and(|s| s == 401);
            }
            if all {
                return Some(started.elapsed());
            }
            if started.elapsed() > bound {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

/// One run: the cluster, posture on it, the load, the loss; checks and figures into `report`.
pub fn run(
    bin: &std::path::Path,
    cx: &Context,
    how: How,
    scenario: &'static str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let How {
        loss,
        synchronous,
        run,
    } = how;
    // What must hold, not only be measured: with synchronous replication, or a planned
    // switchover, no acknowledged write may be lost.
    let strict = synchronous || matches!(loss, Loss::Switchover);
    let mut patroni = Patroni::start(synchronous)?;
    let cluster = Cluster::on_hosts(bin.to_path_buf(), &patroni.hosts())?;
    let reader = cluster.reader("failover")?;
    let writer = cluster.customer("Failover writer")?;
    let bases = cluster.bases();
    // Deliveries to the task's receiver, slow enough to be in flight at the loss.
    let delivering = cluster.customer("Failover deliveries")?;
    let hooks: Vec<String> = (0..HOOKS)
        .map(|i| format!("{scenario}-{run}-{i}"))
        .collect();
    for hook in &hooks {
        cx.receiver.set(hook, Behaviour::Slow(RECEIVER_DELAY));
        cx.subscribe_on(&bases[0], &delivering, hook, EVERY_EVENT)?;
    }
    let ingesting = cluster.customer("Failover ingest")?;
    let early = cluster.customer("Failover revoked early")?;
    let big = cluster.pass_file(&ingesting.tenant, &format!("fo{run}"), INGEST_FINDINGS)?;
    let big = big.to_str().unwrap_or_default().to_owned();
    let load = Load::start(&bases, &reader.key, 4);
    let writing = start_writing(&bases, &writer);
    std::thread::sleep(Duration::from_secs(2));
    let pass = cluster.ingest(&delivering, &format!("fd{run}-"), DELIVERY_FINDINGS)?;
    let queued = pass["deliveriesQueued"].as_i64().unwrap_or(0);
    revoke(&cluster, &early)?;
    let old = patroni
        .leader()
        .ok_or_else(|| anyhow::anyhow!("no leader"))?;
    let mut ingest = cluster.spawn_cli(&["ingest", "--customer", &ingesting.id, &big])?;
    // Into its writing (a pass of 30,000 findings takes seconds), and still running at
    // the loss, which follows at once.
    std::thread::sleep(Duration::from_millis(1500));
    let delivered_before = cluster.outbox(&delivering)?.1;
    let in_flight = ingest.try_wait()?.is_none();
    let lost_at = load.now();
    let lost = Instant::now();
    match loss {
        Loss::Killed => patroni.kill_member(&old)?,
        Loss::Switchover => patroni.switchover(&old)?,
    }
    let new = patroni.wait_for_leader_other_than(&old, Duration::from_secs(3 * TTL_SECS + 30))?;
    let promoted = lost.elapsed();
    // Service back, then a few seconds more of load.
    let deadline = Instant::now() + Duration::from_secs(30);
    std::thread::sleep(Duration::from_secs(5));
    while Instant::now() < deadline && cluster.count("SELECT 1").is_err() {
        std::thread::sleep(Duration::from_millis(100));
    }
    let writes = writing.stop()?;
    let samples = load.stop();
    let after = &samples
        .iter()
        .filter(|s| s.sent >= lost_at)
        .cloned()
        .collect::<Vec<_>>();
    let summary = Summary::of(after);
    let back = recovery_after(&samples, lost_at);
    report.info(
        scenario,
        "new leader elected after",
        format!("{} ({old} -> {new})", secs(promoted)),
    );
    report.check(
        scenario,
        "first 200 of every read after the loss",
        back.map_or("never".into(), secs),
        &format!("within {} s", 2 * TTL_SECS + 10),
        back.is_some_and(|b| b <= Duration::from_secs(2 * TTL_SECS + 10)),
    );
    report.check(
        scenario,
        "answers meanwhile: 503 without Retry-After / 500 and others / no answer",
        format!(
            "{} / {} / {} of {}",
            summary.unavailable_without_retry_after,
            summary.other_errors,
            summary.no_response,
            summary.requests
        ),
        "0 / 0 / 0",
        summary.unavailable_without_retry_after == 0
            && summary.other_errors == 0
            && summary.no_response == 0,
    );

    // Acknowledged writes, on the new primary.
    let (lost_writes, acknowledged) = writes.lost(&cluster, &writer)?;
    let measure = "acknowledged writes lost (subscriptions created or deleted)";
    let value = format!("{lost_writes} of {acknowledged}");
    if strict {
        report.check(scenario, measure, value, "0", lost_writes == 0);
    } else {
        report.info(
            scenario,
            &format!("{measure}, asynchronous replication"),
            value,
        );
    }

    // A revocation acknowledged just before the loss holds after it; one made after the
    // failover reaches both instances.
    let early_refused = refused_everywhere(&bases, &early.key, Duration::from_secs(2))?;
    let measure = "a key revoked just before the loss: 401 on both instances after";
    let value = if early_refused.is_some() { "yes" } else { "no" };
    if strict {
        report.check(scenario, measure, value, "yes", early_refused.is_some());
    } else {
        report.info(
            scenario,
            &format!("{measure}, asynchronous replication"),
            value,
        );
    }
    let revoked = cluster.customer("Failover revoked")?;
    revoke(&cluster, &revoked)?;
    let refused = refused_everywhere(&bases, &revoked.key, Duration::from_secs(10))?;
    report.check(
        scenario,
        "a key revoked after the failover: 401 on both instances",
        refused.map_or("never".into(), secs),
        "within 2 s",
        refused.is_some_and(|r| r <= Duration::from_secs(2)),
    );

    // The ingest in flight at the loss failed whole, and runs again whole; the pass reported
    // committed before the loss is there.
    let failed = !ingest.wait()?.success();
    let left = cluster.rows_left(&ingesting)?;
    let outcome = match (failed, left) {
        (true, 0) => "failed, nothing left",
        (true, _) => "failed, rows left",
        (false, 0) => "reported committed, lost with the primary",
        (false, _) => "committed before the loss",
    };
    report.check(
        scenario,
        "an ingest writing at the loss",
        format!("{outcome} (running 0.1 s before: {in_flight})"),
        if strict {
            "failed, nothing left (or committed before the loss)"
        } else {
            "never half written (asynchronous: a commit acknowledged at the loss may be lost)"
        },
        if strict {
            outcome == "failed, nothing left" || outcome == "committed before the loss"
        } else {
            outcome != "failed, rows left"
        },
    );
    let (rerun, findings) = cluster.ingest_again(&ingesting, &big)?;
    report.check(
        scenario,
        "that ingest run again: findings",
        findings,
        &INGEST_FINDINGS.to_string(),
        rerun && findings == INGEST_FINDINGS as i64,
    );
    let kept = cluster.count(&format!(
        "SELECT count(*) FROM findings WHERE customer_id = '{}'",
        delivering.id
    ))?;
    let measure = "a pass reported committed 2 s before the loss: its findings after";
    let value = format!("{kept} of {DELIVERY_FINDINGS}");
    if strict {
        report.check(
            scenario,
            measure,
            value,
            "all",
            kept == DELIVERY_FINDINGS as i64,
        );
    } else {
        report.info(
            scenario,
            &format!("{measure}, asynchronous replication"),
            value,
        );
    }

    // Deliveries queued before the loss: all delivered, at least once, same bytes.
    cluster.drained(&delivering, Duration::from_secs(180))?;
    let (mut distinct, mut duplicates, mut changed) = (0i64, 0u32, 0usize);
    for hook in &hooks {
        for seen in cx.receiver.seen(hook).values() {
            distinct += 1;
            duplicates += seen.attempts - 1;
            changed += usize::from(seen.bodies.len() > 1);
        }
    }
    let lost = queued - distinct;
    let measure =
        "deliveries queued before the loss: lost / duplicates / retries that changed bytes";
    let value = format!(
        "{lost} / {duplicates} / {changed} of {queued} ({delivered_before} delivered before)"
    );
    let pass = lost == 0 && changed == 0 && queued > 0;
    if strict {
        report.check(scenario, measure, value, "0 / any / 0", pass);
    } else {
        report.check(
            scenario,
            measure,
            value,
            "0 / any / 0 (a lost commit may lose its deliveries: asynchronous)",
            changed == 0,
        );
    }
    drop(cluster);
    drop(patroni);
    Ok(())
}
