//! The Citus scenarios of `cargo xtask chaos` (docs/reliability.md, "Citus"), each on a
//! coordinator and two workers of its own: a worker node killed (SIGKILL) under load and
//! brought back, and a third worker added and the shards rebalanced onto it under reads, a
//! pass and deliveries.
//!
//! The promises: the customers of the other node keep getting 200; the lost node's
//! customers get 503 with `Retry-After` (never 500, never another customer's rows); their
//! deliveries wait and none is lost; everything recovers once the node is back, without
//! restarting posture. A rebalance costs no error and no row.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context as _, ensure};
use posture_test_support::servers::PostgresServer;

use super::{
    Context, EVERY_EVENT,
    cluster::{CITUS_SETTINGS as SETTINGS, Cluster, Customer},
    deliveries::deliver_one_pass,
    outages::wait_for,
    report::{Report, secs},
    traffic::{Load, PATHS, Sample, Spec, Summary, recovery_after},
};
use crate::process::psql_value;

/// Customers of the scenarios, spread over the workers by their ids.
const CUSTOMERS: usize = 8;
/// How long the node stays down.
const OUTAGE: Duration = Duration::from_secs(15);
/// Service is back this soon after the node is.
const RECOVERY_BOUND: Duration = Duration::from_secs(10);

/// Where `customer`'s shards are: `column` of the primary node holding its `findings`
/// shard (`nodeport`; `groupid`, the node group under Patroni).
pub(super) fn placement_of(
    cluster: &Cluster,
    customer: &Customer,
    column: &str,
) -> anyhow::Result<u32> {
    Ok(cluster
        .psql(&format!(
            "SELECT {column} FROM pg_dist_placement JOIN pg_dist_node USING (groupid) \
             WHERE noderole = 'primary' \
             AND shardid = get_shard_id_for_distribution_column('findings', '{}')",
            customer.id
        ))?
        .parse()?)
}

/// [`CUSTOMERS`] customers with a pass to read and a subscription to the receiver each, at
/// least two on every worker group (a customer's group is its id's hash: eight random ones
/// all land on one of two groups about once in 128 runs).
pub(super) fn customers(
    cluster: &Cluster,
    cx: &Context,
    tag: &str,
) -> anyhow::Result<Vec<Customer>> {
    const EACH: usize = 2;
    let groups: Vec<u32> = cluster
        .psql(
            "SELECT string_agg(groupid::text, ',') FROM pg_dist_node \
               WHERE groupid > 0 AND noderole = 'primary'",
        )?
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let api = cluster.bases()[0].clone();
    let mut chosen: Vec<(Customer, u32)> = Vec::new();
    for _ in 0..CUSTOMERS * 4 {
        let i = chosen.len();
        if i == CUSTOMERS {
            break;
        }
        let customer = cluster.customer(&format!("Chaos load {tag}{i}"))?;
        let group = placement_of(cluster, &customer, "groupid")?;
        // The places the other groups still need are kept for them.
        let needed: usize = groups
            .iter()
            .filter(|g| **g != group)
            .map(|g| EACH.saturating_sub(chosen.iter().filter(|(_, h)| h == g).count()))
            .sum();
        if CUSTOMERS - i - 1 < needed {
            continue;
        }
        cluster.give_reads(&customer, &format!("{tag}{i}"))?;
        cx.subscribe_on(&api, &customer, &format!("{tag}-{i}"), EVERY_EVENT)?;
        chosen.push((customer, group));
    }
    ensure!(
        chosen.len() == CUSTOMERS,
        "no {CUSTOMERS} customers with {EACH} on each worker group in {} tries",
        CUSTOMERS * 4
    );
    Ok(chosen.into_iter().map(|(customer, _)| customer).collect())
}

pub(super) fn load(cluster: &Cluster, customers: &[&Customer]) -> Load {
    let keys: Vec<String> = customers.iter().map(|c| c.key.clone()).collect();
    Load::spec(&Spec {
        instances: &cluster.bases(),
        keys: &keys,
        tasks: 2,
        pause: Duration::from_millis(20),
        paths: PATHS,
    })
}

/// Whether every finding `customer`'s key reads is one of its own (its passes' ids begin
/// with its tag, `l{tag}-` or `{prefix}`).
fn reads_only_its_own(cluster: &Cluster, customer: &Customer, own: &[String]) -> bool {
    let base = cluster.bases()[0].clone();
    super::block_on(async {
        let Ok(response) = reqwest::Client::new()
            .get(format!("{base}/api/v1/findings?limit=500"))
            .bearer_auth(&customer.key)
            .send()
            .await
        else {
            return false;
        };
        let Ok(body) = response.json::<serde_json::Value>().await else {
            return false;
        };
        body["data"].as_array().is_some_and(|rows| {
            !rows.is_empty()
                && rows.iter().all(|row| {
                    row["id"]
                        .as_str()
                        .is_some_and(|id| own.iter().any(|p| id.starts_with(p.as_str())))
                })
        })
    })
    .unwrap_or(false)
}

/// The pid of a node's postmaster (the first line of `postmaster.pid`).
fn postmaster_pid(node: &PostgresServer) -> anyhow::Result<u32> {
    let text = std::fs::read_to_string(node.data_dir().join("postmaster.pid"))?;
    Ok(text
        .lines()
        .next()
        .context("an empty postmaster.pid")?
        .trim()
        .parse()?)
}

pub(super) fn during(samples: &[Sample], from: Duration, to: Duration) -> Summary {
    Summary::of(samples.iter().filter(|s| s.sent >= from && s.sent <= to))
}

/// A worker node killed under load, 15 s down, then started again.
pub fn node_lost(bin: &Path, cx: &Context, report: &mut Report) -> anyhow::Result<()> {
    const S: &str = "Citus worker node SIGKILL";
    let mut cluster = Cluster::on_citus(bin.to_path_buf(), 2)?;
    let all = customers(&cluster, cx, "node")?;
    let lost_port = cluster.citus_workers[0].port();
    let mut lost = Vec::new();
    let mut kept = Vec::new();
    for (i, customer) in all.iter().enumerate() {
        if placement_of(&cluster, customer, "nodeport")? == u32::from(lost_port) {
            lost.push((i, customer));
        } else {
            kept.push((i, customer));
        }
    }
    ensure!(
        !lost.is_empty() && !kept.is_empty(),
        "the customers are all on one node"
    );
    report.info(
        S,
        "customers on the lost node / on the other",
        format!("{} / {}", lost.len(), kept.len()),
    );
    // Deliveries of the lost node's customers, queued while no posture worker runs: they
    // are pending when the node goes.
    cluster.signal_worker(0, "TERM")?;
    cluster.signal_worker(1, "TERM")?;
    let mut waiting = 0;
    for (i, customer) in &lost {
        let pass = cluster.ingest(customer, &format!("q{i}-"), 3)?;
        waiting += pass["deliveriesQueued"].as_i64().unwrap_or(0);
    }
    let lost_customers: Vec<&Customer> = lost.iter().map(|(_, c)| *c).collect();
    let kept_customers: Vec<&Customer> = kept.iter().map(|(_, c)| *c).collect();
    let kept_load = load(&cluster, &kept_customers);
    let lost_load = load(&cluster, &lost_customers);
    std::thread::sleep(Duration::from_secs(2));

    let down = (kept_load.now(), lost_load.now());
    let postmaster = postmaster_pid(&cluster.citus_workers[0])?;
    std::process::Command::new("kill")
        .args(["-KILL", &postmaster.to_string()])
        .status()?;
    let killed_at = Instant::now();
    cluster.start_worker(0)?;
    cluster.start_worker(1)?;
    // Meanwhile the other node's customers run a pass, delivered.
    let (kept_queued, kept_took) = deliver_one_pass(&cluster, kept[0].1, "during-")?;
    let own_only = kept.iter().enumerate().all(|(n, (i, customer))| {
        let mut own = vec![format!("lnode{i}-")];
        if n == 0 {
            own.push("during-".to_owned());
        }
        reads_only_its_own(&cluster, customer, &own)
    });
    // What the receiver got of the lost node's deliveries while it was down (they wait).
    let sent_meanwhile: usize = lost
        .iter()
        .map(|(i, _)| cx.receiver.seen(&format!("node-{i}")).len())
        .sum();
    std::thread::sleep(OUTAGE.saturating_sub(killed_at.elapsed()));
    cluster.citus_workers[0].restart()?;
    let up = (kept_load.now(), lost_load.now());
    std::thread::sleep(Duration::from_secs(12));
    let kept_samples = kept_load.stop();
    let lost_samples = lost_load.stop();
    let mut drained = Vec::new();
    for (_, customer) in &lost {
        drained.push(cluster.drained(customer, Duration::from_secs(90)));
    }

    let kept_outage = during(&kept_samples, down.0, up.0);
    let lost_outage = during(&lost_samples, down.1, up.1);
    let lost_all = Summary::of(&lost_samples);
    report.info(
        S,
        "requests of the other node's customers during the outage, per status",
        format!("{:?}", kept_outage.statuses),
    );
    report.info(
        S,
        "requests of the lost node's customers during the outage, per status",
        format!("{:?}", lost_outage.statuses),
    );
    report.check(
        S,
        "the other node's customers: answers other than 200 during the outage",
        kept_outage.requests - kept_outage.ok,
        "0",
        kept_outage.requests > 0 && kept_outage.ok == kept_outage.requests,
    );
    report.check(
        S,
        "the lost node's customers: 500s, other errors, no response (whole run)",
        lost_all.other_errors + lost_all.no_response,
        "0",
        lost_all.other_errors + lost_all.no_response == 0,
    );
    report.check(
        S,
        "the lost node's customers: 503 during the outage, without Retry-After",
        format!(
            "{} of {}",
            lost_outage.unavailable_without_retry_after, lost_outage.unavailable
        ),
        "some 503, 0 without",
        lost_outage.unavailable > 0 && lost_outage.unavailable_without_retry_after == 0,
    );
    report.check(
        S,
        "a key of the other node reads only its customer's rows during the outage",
        own_only,
        "true",
        own_only,
    );
    report.check(
        S,
        "a pass of the other node's customer during the outage: delivered",
        format!("{kept_queued} in {}", secs(kept_took)),
        "delivered",
        kept_queued > 0,
    );
    report.check(
        S,
        "the lost node's deliveries queued before it went: sent while it was down",
        format!("{sent_meanwhile} of {waiting}"),
        "0 (they wait)",
        waiting > 0 && sent_meanwhile == 0,
    );
    let received: usize = lost
        .iter()
        .map(|(i, _)| cx.receiver.seen(&format!("node-{i}")).len())
        .sum();
    report.check(
        S,
        "the lost node's deliveries received once it is back",
        format!("{received} of {waiting}"),
        "all",
        i64::try_from(received).is_ok_and(|r| r == waiting),
    );
    let all_drained = drained.iter().all(Result::is_ok);
    report.check(
        S,
        "the lost node's deliveries once it is back",
        if all_drained {
            "all delivered".to_owned()
        } else {
            format!("{drained:?}")
        },
        "all delivered",
        all_drained,
    );
    let failed: i64 = lost
        .iter()
        .map(|(_, c)| cluster.outbox(c).map(|o| o.2).unwrap_or(1))
        .sum();
    report.check(S, "deliveries failed", failed, "0", failed == 0);
    for instance in 0..2 {
        let mine: Vec<Sample> = lost_samples
            .iter()
            .filter(|s| s.instance == instance)
            .cloned()
            .collect();
        let recovery = recovery_after(&mine, up.1);
        report.check(
            S,
            &format!(
                "instance {instance}: the lost node's customers back to 200 after it returned"
            ),
            recovery.map_or_else(|| "never".to_owned(), secs),
            "≤ 10 s, without restarting posture",
            recovery.is_some_and(|r| r <= RECOVERY_BOUND),
        );
    }
    Ok(())
}

/// Rows of customer data, for "nothing lost": findings, events and deliveries.
fn rows(cluster: &Cluster) -> anyhow::Result<(i64, i64, i64)> {
    Ok((
        cluster.count("SELECT count(*) FROM findings")?,
        cluster.count("SELECT count(*) FROM finding_events")?,
        cluster.count("SELECT count(*) FROM webhook_deliveries")?,
    ))
}

/// A third worker added, and the shards rebalanced onto it while both instances serve
/// reads, a pass of 20,000 findings runs and deliveries go out.
pub fn rebalance(bin: &Path, cx: &Context, report: &mut Report) -> anyhow::Result<()> {
    const S: &str = "Citus node added, shards rebalanced";
    let cluster = Cluster::on_citus(bin.to_path_buf(), 2)?;
    let all = customers(&cluster, cx, "move")?;
    let third = PostgresServer::start(
        &crate::files::scratch_dir("chaos-citus-third")?,
        &format!("{} {SETTINGS}", posture_test_support::citus::NODE_SETTINGS),
    )?;
    psql_value(&third.url, "CREATE EXTENSION citus")?;
    crate::servers::citus_add_node(&cluster.postgres, &third)?;
    let placements = |port: u16| {
        cluster.count(&format!(
            "SELECT count(*) FROM pg_dist_shard_placement WHERE nodeport = {port}"
        ))
    };
    let before = rows(&cluster)?;
    let refs: Vec<&Customer> = all.iter().collect();
    let reads = load(&cluster, &refs);
    std::thread::sleep(Duration::from_secs(2));
    let file = cluster.pass_file(&all[0].tenant, "big", 20_000)?;
    let mut pass = cluster.spawn_cli(&[
        "ingest",
        "--customer",
        &all[0].id,
        file.to_str().context("a UTF-8 path")?,
    ])?;
    let (queued, _) = deliver_one_pass(&cluster, &all[1], "moving-")?;
    let started = Instant::now();
    cluster.psql("SELECT citus_rebalance_start()")?;
    let finished = wait_for(Duration::from_secs(300), || {
        cluster
            .psql("SELECT state FROM citus_rebalance_status()")
            .is_ok_and(|state| state == "finished")
    });
    let took = started.elapsed();
    let pass_ok = pass.wait()?.success();
    std::thread::sleep(Duration::from_secs(2));
    let samples = reads.stop();
    let drained = all
        .iter()
        .map(|c| cluster.drained(c, Duration::from_secs(90)))
        .collect::<Result<Vec<_>, _>>();
    let after = rows(&cluster)?;
    let moved = placements(third.port())?;
    let summary = Summary::of(&samples);
    report.info(
        S,
        "shard placements on the new node",
        format!("{moved} (rebalance {})", secs(took)),
    );
    report.info(S, "reads per status", format!("{:?}", summary.statuses));
    report.check(S, "the rebalance finished", finished, "true", finished);
    report.check(S, "shards moved to the new node", moved, "> 0", moved > 0);
    report.check(
        S,
        "reads during the rebalance: errors and requests without a response",
        summary.requests - summary.ok,
        "0",
        summary.requests > 0 && summary.ok == summary.requests,
    );
    report.check(
        S,
        "a pass of 20,000 findings meanwhile",
        pass_ok,
        "committed",
        pass_ok,
    );
    report.check(
        S,
        "deliveries meanwhile",
        format!("{queued} queued, drained: {}", drained.is_ok()),
        "all delivered",
        queued > 0 && drained.is_ok(),
    );
    report.check(
        S,
        "rows (findings, events, deliveries) before → after",
        format!("{before:?} → {after:?}"),
        "none lost: the two passes' 20,004 findings and their events added",
        after.0 == before.0 + 20_004 && after.1 == before.1 + 20_004 && after.2 >= before.2,
    );
    drop(cluster);
    drop(third);
    Ok(())
}
