//! The Citus high-availability scenarios of `cargo xtask chaos` (docs/reliability.md,
//! "Citus with a standby per node"): a Citus cluster whose coordinator group and two worker
//! groups are each a primary and a synchronous standby under Patroni's Citus mode
//! (`patroni.rs`), posture-api ×2 and posture-worker ×2 naming both coordinator members in
//! their `DATABASE_URL` with `target_session_attrs=read-write`. Under reads of every
//! customer, writes (webhook subscriptions created and deleted), passes and deliveries:
//!
//! - a worker group's primary is lost (Patroni and postmaster `kill -9`): its standby is
//!   promoted and Patroni points the coordinator's `pg_dist_node` at it;
//! - a worker group is switched over as planned (`patronictl switchover --group`);
//! - the coordinator's primary is lost.
//!
//! Triage writes (`PATCH /findings/{id}`) of one customer and SCIM provisioning (users
//! created, deactivated, reactivated, deleted) of another run meanwhile too.
//!
//! The promises: the other group's customers get 200 throughout; the affected ones get 503
//! with `Retry-After` meanwhile (never a 500 nor a request without an answer) and 200 again
//! once the standby serves, without restarting posture; no acknowledged write is lost; no
//! delivery is lost; after the coordinator's loss, a revocation reaches both instances and
//! the worker delivers again. The three share one cluster: a lost member comes back as a
//! standby before the next scenario.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use crate::process::psql_value;

use super::{
    Context,
    citus::{customers, during, load, placement_of},
    citus_ha_checks::{
        RECOVERY_BOUND, TAG, affected, drained, in_flight, pending, slow, writes_checked,
    },
    cluster::{Cluster, Customer},
    deliveries::deliver_one_pass,
    failover::{Loss, refused_everywhere, revoke},
    outages::wait_for,
    patroni::{Patroni, TTL_SECS},
    report::{Report, secs},
    scim_users,
    subscriptions::start_writing,
    triages,
};

/// The worker group the worker scenarios fail over.
const GROUP: u32 = 1;
/// Worker groups of the cluster.
const WORKER_GROUPS: u32 = 2;
/// Load kept up after service is back.
const AFTER: Duration = Duration::from_secs(5);

/// The cluster and posture on it, shared by the scenarios.
pub struct Ha {
    // posture's processes stop before the nodes they run on (fields drop in this order).
    cluster: Cluster,
    customers: Vec<Customer>,
    /// A customer on [`GROUP`]'s nodes whose key only writes (subscriptions to an address
    /// that never answers: it runs no pass, so nothing is delivered to them).
    writer: Customer,
    patroni: Patroni,
}

impl Ha {
    /// Starts the Patroni Citus cluster (synchronous replication in every group), migrates
    /// it and starts posture on it, with customers subscribed to the receiver.
    pub fn start(bin: &Path, cx: &Context) -> anyhow::Result<Self> {
        let patroni = Patroni::start_citus(true, WORKER_GROUPS)?;
        // Patroni registers the worker groups' primaries on its own loop: the schema is
        // distributed over the nodes registered when it is made.
        let coordinator = format!(
            "postgres://postgres@{}/postgres?target_session_attrs=read-write",
            patroni.hosts_of(Some(0))
        );
        let registered = wait_for(Duration::from_secs(60), || {
            psql_value(
                &coordinator,
                "SELECT count(*) FROM pg_dist_node WHERE groupid > 0 AND noderole = 'primary'",
            )
            .is_ok_and(|n| n == WORKER_GROUPS.to_string())
        });
        if !registered {
            bail!("Patroni did not register both worker groups within 60 s");
        }
        let cluster = Cluster::on_coordinators(bin.to_path_buf(), &patroni.hosts_of(Some(0)))?;
        let customers = customers(&cluster, cx, TAG)?;
        let mut writer = None;
        for i in 0..16 {
            let candidate = cluster.customer(&format!("Citus HA writer {i}"))?;
            if placement_of(&cluster, &candidate, "groupid")? == GROUP {
                writer = Some(candidate);
                break;
            }
        }
        Ok(Self {
            writer: writer.context("a customer on the group's nodes")?,
            patroni,
            cluster,
            customers,
        })
    }
}

/// The customers on `group`'s nodes, and the others.
fn split<'a>(
    cluster: &Cluster,
    customers: &'a [Customer],
    group: u32,
) -> anyhow::Result<(Vec<&'a Customer>, Vec<&'a Customer>)> {
    let mut on = Vec::new();
    let mut off = Vec::new();
    for customer in customers {
        if placement_of(cluster, customer, "groupid")? == group {
            on.push(customer);
        } else {
            off.push(customer);
        }
    }
    if on.is_empty() || off.is_empty() {
        bail!("the customers are all in one group");
    }
    Ok((on, off))
}

/// Waits until `pg_dist_node` (as the coordinator's primary reads it) names `port` for
/// `group`'s primary, within `bound`.
fn wait_registered(
    cluster: &Cluster,
    group: u32,
    port: u16,
    bound: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + bound;
    let registered = || -> anyhow::Result<u16> {
        Ok(cluster
            .psql(&format!(
                "SELECT nodeport FROM pg_dist_node \
                 WHERE groupid = {group} AND noderole = 'primary'"
            ))?
            .parse()?)
    };
    while registered().ok() != Some(port) {
        if Instant::now() > deadline {
            bail!("pg_dist_node did not name port {port} for group {group} within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Brings a lost member back as a standby and waits for every group to be whole.
fn restore(patroni: &mut Patroni, member: &str) -> anyhow::Result<()> {
    patroni.restart_member(member)?;
    patroni.wait_until_healthy(Duration::from_secs(90))
}

/// Passes of `findings` new findings for each of `these`, queued while the workers are
/// stopped and answered by the receiver slowly: their deliveries are pending or in flight at
/// the loss whatever the timing. Worker 0 starts again just before it (its deliveries in
/// flight, its connections cut); the caller starts worker 1 after it. Returns (queued,
/// pending now).
fn queue_before_loss(
    cluster: &mut Cluster,
    cx: &Context,
    customers: &[Customer],
    these: &[&Customer],
    prefix: &str,
    findings: usize,
) -> anyhow::Result<(i64, i64)> {
    slow(cx, customers, these, true);
    cluster.signal_worker(0, "TERM")?;
    cluster.signal_worker(1, "TERM")?;
    let mut queued = 0;
    for (i, customer) in these.iter().enumerate() {
        let pass = cluster.ingest(customer, &format!("{prefix}-q{i}-"), findings)?;
        queued += pass["deliveriesQueued"].as_i64().unwrap_or(0);
    }
    cluster.start_worker(0)?;
    Ok((queued, pending(cluster, these)?))
}

/// A worker group's primary lost (`Loss::Killed`) or switched over (`Loss::Switchover`).
pub fn worker_group(
    ha: &mut Ha,
    cx: &Context,
    loss: Loss,
    (scenario, run): (&'static str, usize),
    report: &mut Report,
) -> anyhow::Result<()> {
    let Ha {
        cluster,
        customers,
        writer,
        patroni,
    } = ha;
    // Every group whole: a standby to promote (after a switchover the former primary
    // rejoins as one).
    patroni.wait_until_healthy(Duration::from_secs(90))?;
    let (on, off) = split(cluster, customers, GROUP)?;
    let bases = cluster.bases();
    report.info(
        scenario,
        "customers on the group / on the others",
        format!("{} / {}", on.len(), off.len()),
    );
    let on_load = load(cluster, &on);
    let off_load = load(cluster, &off);
    let writing = start_writing(&bases, writer);
    let triaging = triages::start(cluster, on[on.len() - 1])?;
    let provisioning = scim_users::start(cluster, on[0], &format!("{scenario}{run}"))?;
    std::thread::sleep(Duration::from_secs(2));
    // Worker 1 starts again once the group's standby is registered.
    let (queued, pending) =
        queue_before_loss(cluster, cx, customers, &on, &format!("{scenario}{run}"), 3)?;

    let old = patroni
        .leader_of(Some(GROUP))
        .context("the group's leader")?;
    let down = (on_load.now(), off_load.now());
    let started = Instant::now();
    match loss {
        Loss::Killed => patroni.kill_member(&old)?,
        Loss::Switchover => patroni.switchover(&old)?,
    }
    let watching = &*patroni;
    let shared = &*cluster;
    // The other groups' customers run a pass meanwhile, delivered.
    let (new, promoted, registered, off_pass) = std::thread::scope(|scope| {
        let prefix = format!("{scenario}{run}-");
        let off_pass = scope.spawn(move || deliver_one_pass(shared, off[0], &prefix));
        let promotion = || -> anyhow::Result<_> {
            let new = watching
                .wait_for_leader_other_than(&old, Duration::from_secs(3 * TTL_SECS + 30))?;
            let promoted = started.elapsed();
            wait_registered(shared, GROUP, watching.pg_port(&new)?, RECOVERY_BOUND)?;
            Ok((new, promoted, started.elapsed()))
        };
        let promoted = promotion();
        let off_pass = off_pass
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the pass's thread panicked")));
        promoted.map(|(new, promoted, registered)| (new, promoted, registered, off_pass))
    })?;
    let (off_queued, off_took) = off_pass?;
    cluster.start_worker(1)?;
    slow(cx, customers, &on, false);
    std::thread::sleep(AFTER);
    let writes = writing.stop()?;
    let on_samples = on_load.stop();
    let off_samples = off_load.stop();

    report.info(
        scenario,
        "standby promoted / pg_dist_node updated after",
        format!("{} / {} ({old} -> {new})", secs(promoted), secs(registered)),
    );
    let off_after = during(&off_samples, down.1, Duration::MAX);
    report.check(
        scenario,
        "the other groups' customers: answers other than 200 from the loss on",
        format!(
            "{} of {}",
            off_after.requests - off_after.ok,
            off_after.requests
        ),
        "0",
        off_after.requests > 0 && off_after.ok == off_after.requests,
    );
    in_flight(scenario, report, pending, queued);
    report.check(
        scenario,
        "a pass of another group's customer meanwhile: delivered",
        format!("{off_queued} in {}", secs(off_took)),
        "delivered before the group is back",
        off_queued > 0 && off_took < registered,
    );
    affected(scenario, report, &on_samples, down.0, loss);
    let (lost, acknowledged) = writes.lost(cluster, writer)?;
    report.check(
        scenario,
        "acknowledged writes lost (subscriptions created or deleted on the group)",
        format!("{lost} of {acknowledged}"),
        "0",
        lost == 0 && acknowledged > 0,
    );
    let triaged = triaging.stop()?.lost(cluster, on[on.len() - 1])?;
    let provisioned = provisioning.stop()?.lost(cluster, on[0])?;
    writes_checked(
        scenario,
        report,
        (triaged, provisioned),
        writes.server_errors(),
    );
    drained(cluster, scenario, report, &on, queued)?;
    if matches!(loss, Loss::Killed) {
        restore(patroni, &old)?;
    }
    Ok(())
}

/// The coordinator's primary lost, under reads, writes and deliveries.
pub fn coordinator(
    ha: &mut Ha,
    cx: &Context,
    (scenario, run): (&'static str, usize),
    report: &mut Report,
) -> anyhow::Result<()> {
    let Ha {
        cluster,
        customers,
        writer,
        patroni,
    } = ha;
    patroni.wait_until_healthy(Duration::from_secs(90))?;
    let everyone: Vec<&Customer> = customers.iter().collect();
    let bases = cluster.bases();
    let reads = load(cluster, &everyone);
    let writing = start_writing(&bases, writer);
    let triaging = triages::start(cluster, everyone[2])?;
    let provisioning = scim_users::start(cluster, everyone[3], &format!("{scenario}{run}"))?;
    std::thread::sleep(Duration::from_secs(2));
    // Worker 1 starts again once the standby is promoted.
    let (queued, pending) = queue_before_loss(
        cluster,
        cx,
        customers,
        &everyone,
        &format!("{scenario}{run}"),
        2,
    )?;
    let old = patroni
        .leader_of(Some(0))
        .context("the coordinator's leader")?;
    let down = reads.now();
    let started = Instant::now();
    patroni.kill_member(&old)?;
    let new = patroni.wait_for_leader_other_than(&old, Duration::from_secs(3 * TTL_SECS + 30))?;
    let promoted = started.elapsed();
    let answered = wait_for(RECOVERY_BOUND, || cluster.count("SELECT 1").is_ok());
    cluster.start_worker(1)?;
    slow(cx, customers, &everyone, false);
    std::thread::sleep(AFTER);
    let writes = writing.stop()?;
    let samples = reads.stop();
    report.info(
        scenario,
        "standby promoted after",
        format!("{} ({old} -> {new})", secs(promoted)),
    );
    in_flight(scenario, report, pending, queued);
    report.check(
        scenario,
        "the new coordinator answers (through posture's DATABASE_URL hosts)",
        answered,
        "true",
        answered,
    );
    affected(scenario, report, &samples, down, Loss::Killed);
    let (lost, acknowledged) = writes.lost(cluster, writer)?;
    report.check(
        scenario,
        "acknowledged writes lost (subscriptions created or deleted)",
        format!("{lost} of {acknowledged}"),
        "0",
        lost == 0 && acknowledged > 0,
    );
    let triaged = triaging.stop()?.lost(cluster, everyone[2])?;
    let provisioned = provisioning.stop()?.lost(cluster, everyone[3])?;
    writes_checked(
        scenario,
        report,
        (triaged, provisioned),
        writes.server_errors(),
    );
    // The key cache's LISTEN follows the coordinator: a revocation reaches both instances.
    let revoked = cluster.customer(&format!("Citus coordinator revoked {run}"))?;
    revoke(cluster, &revoked)?;
    let refused = refused_everywhere(&bases, &revoked.key, Duration::from_secs(10))?;
    report.check(
        scenario,
        "a key revoked after the failover: 401 on both instances",
        refused.map_or("never".into(), secs),
        "within 2 s",
        refused.is_some_and(|r| r <= Duration::from_secs(2)),
    );
    drained(cluster, scenario, report, &everyone, queued)?;
    // The worker resumes: a pass after the failover is delivered.
    let (after_queued, after_took) =
        deliver_one_pass(cluster, everyone[1], &format!("{scenario}{run}-after-"))?;
    report.check(
        scenario,
        "a pass after the failover: delivered",
        format!("{after_queued} in {}", secs(after_took)),
        "delivered",
        after_queued > 0,
    );
    restore(patroni, &old)
}
