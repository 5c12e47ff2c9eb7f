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

use std::{
    collections::BTreeSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::json;

use super::{
    Context, EVERY_EVENT,
    cluster::{Cluster, Customer},
    patroni::{Patroni, TTL_SECS},
    receiver::Behaviour,
    report::{Report, secs},
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

/// Acknowledged writes: subscriptions whose creation was answered 201 (and not deleted
/// since), and those whose deletion was answered 204.
#[derive(Default)]
pub(super) struct Writes {
    kept: BTreeSet<String>,
    deleted: BTreeSet<String>,
    acknowledged: usize,
    /// Answers in 500..=599 but 503: never an answer to a fault of the database.
    server_errors: usize,
}

/// Whether a status is a server error other than `503` (whose `Retry-After` says "retry").
fn server_error(status: u16) -> bool {
    (500..=599).contains(&status) && status != 503
}

/// Creates and deletes subscriptions on the instances in turn until `stop`.
fn write_loop(bases: Vec<String>, key: String, stop: Arc<AtomicBool>, writes: Arc<Mutex<Writes>>) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    runtime.block_on(async move {
        let Ok(http) = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
        else {
            return;
        };
        let mut turn = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let base = &bases[turn % bases.len()];
            turn += 1;
            let created = http
                .post(format!("{base}/api/v1/webhooks"))
                .bearer_auth(&key)
                .json(
                    &json!({"name": format!("w{turn}"), "webhookUrl": "https://hooks.example.com/x",
                              "webhookType": "generic", "eventTypes": ["finding_high"]}),
                )
                .send()
                .await;
            let Ok(created) = created else { continue };
            if server_error(created.status().as_u16()) {
                writes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .server_errors += 1;
            }
            if created.status() != 201 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            let Ok(body) = created.json::<serde_json::Value>().await else {
                continue;
            };
            let Some(id) = body["data"]["id"].as_str().map(str::to_owned) else {
                continue;
            };
            {
                let mut w = writes.lock().unwrap_or_else(|p| p.into_inner());
                w.kept.insert(id.clone());
                w.acknowledged += 1;
            }
            let deleted = http
                .delete(format!("{base}/api/v1/webhooks/{id}"))
                .bearer_auth(&key)
                .send()
                .await;
            let mut w = writes.lock().unwrap_or_else(|p| p.into_inner());
            match deleted.map(|r| r.status().as_u16()) {
                Ok(204) => {
                    w.kept.remove(&id);
                    w.deleted.insert(id);
                    w.acknowledged += 1;
                }
                // Not acknowledged: it may or may not have happened.
                answer => {
                    w.kept.remove(&id);
                    w.server_errors += usize::from(answer.is_ok_and(server_error));
                }
            }
        }
    });
}

/// The answers to [`write_loop`]'s writes that were server errors other than `503`.
pub(super) fn server_errors(writes: &Mutex<Writes>) -> usize {
    writes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .server_errors
}

/// Of the writes [`write_loop`] made with `writer`'s key, those acknowledged but not in the
/// database now: (lost, acknowledged).
pub(super) fn writes_lost(
    cluster: &Cluster,
    writer: &Customer,
    writes: &Mutex<Writes>,
) -> anyhow::Result<(usize, usize)> {
    let present: BTreeSet<String> = cluster
        .psql(&format!(
            "SELECT coalesce(string_agg(id::text, ','), '') FROM webhook_subscriptions \
             WHERE customer_id = '{}' AND active",
            writer.id
        ))?
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let writes = writes.lock().unwrap_or_else(|p| p.into_inner());
    let lost =
        writes.kept.difference(&present).count() + writes.deleted.intersection(&present).count();
    Ok((lost, writes.acknowledged))
}

/// Starts [`write_loop`] with `writer`'s key on a thread of its own; set the flag to stop.
pub(super) fn start_writing(
    bases: &[String],
    writer: &Customer,
) -> (
    Arc<AtomicBool>,
    Arc<Mutex<Writes>>,
    std::thread::JoinHandle<()>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(Mutex::new(Writes::default()));
    let writing = {
        let (bases, key, stop, writes) = (
            bases.to_vec(),
            writer.key.clone(),
            stop.clone(),
            writes.clone(),
        );
        std::thread::spawn(move || write_loop(bases, key, stop, writes))
    };
    (stop, writes, writing)
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
    let (stop, writes, writing) = start_writing(&bases, &writer);
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
    stop.store(true, Ordering::Relaxed);
    let _ = writing.join();
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
    let (lost_writes, acknowledged) = writes_lost(&cluster, &writer, &writes)?;
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
