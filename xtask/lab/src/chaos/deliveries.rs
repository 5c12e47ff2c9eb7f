//! Scenarios of the webhook path: workers killed mid-delivery, and receivers that are down,
//! slow or failing. The promise: every delivery arrives (at least once, with the same id and
//! bytes on every attempt), retried on the documented schedule.

use std::{
    net::TcpListener,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{
    Context, block_on,
    cluster::{Cluster, Customer},
    receiver::Behaviour,
    report::Report,
    report::secs,
};

const SUBSCRIPTIONS: usize = 25;
/// 2,000 per severity: 20 chunks of 100 for each of the 4 event types, to each subscription.
const FINDINGS: usize = 8_000;

/// Three workers SIGKILLed (and restarted) while 2,000 deliveries are being sent.
pub fn workers_killed(
    cluster: &mut Cluster,
    cx: &Context,
    report: &mut Report,
) -> anyhow::Result<()> {
    const S: &str = "worker SIGKILL ×3";
    let customer = cluster.customer("Chaos deliveries")?;
    for i in 0..SUBSCRIPTIONS {
        cx.subscribe(&customer, &format!("kill-{i}"), super::EVERY_EVENT)?;
    }
    let pass = cluster.ingest(&customer, "k", FINDINGS)?;
    let started = Instant::now();
    let queued = pass["deliveriesQueued"]
        .as_i64()
        .context("deliveriesQueued")?;
    let mut delivered_at_kills = Vec::new();
    for round in 0..3 {
        std::thread::sleep(Duration::from_millis(600));
        delivered_at_kills.push(cluster.outbox(&customer)?.1);
        cluster.signal_worker(round % 2, "KILL")?;
        std::thread::sleep(Duration::from_millis(200));
        cluster.start_worker(round % 2)?;
    }
    cluster.drained(&customer, Duration::from_secs(180))?;
    let drain = started.elapsed();
    let (_, delivered, failed) = cluster.outbox(&customer)?;
    let (mut distinct, mut duplicates, mut changed) = (0i64, 0u32, 0);
    for i in 0..SUBSCRIPTIONS {
        for seen in cx.receiver.seen(&format!("kill-{i}")).values() {
            distinct += 1;
            duplicates += seen.attempts - 1;
            changed += usize::from(seen.bodies.len() > 1);
        }
    }
    report.check(
        S,
        "deliveries queued by the pass",
        queued,
        "2000",
        queued == 2000,
    );
    report.check(
        S,
        "delivered before each kill",
        format!("{delivered_at_kills:?}"),
        "kills land mid-run",
        delivered_at_kills.iter().any(|&d| d > 0 && d < queued),
    );
    report.check(
        S,
        "delivered (outbox)",
        delivered,
        "all",
        delivered == queued && failed == 0,
    );
    report.check(
        S,
        "lost (queued, never received)",
        queued - distinct,
        "0",
        distinct == queued,
    );
    report.info(S, "duplicate attempts received (at-least-once)", duplicates);
    report.check(
        S,
        "deliveries whose retries changed bytes",
        changed,
        "0",
        changed == 0,
    );
    report.check(
        S,
        "attempts with a bad signature",
        cx.receiver.bad_signatures(),
        "0",
        cx.receiver.bad_signatures() == 0,
    );
    report.info(S, "time to deliver everything", secs(drain));
    Ok(())
}

/// One delivery each to a receiver down for 10 s, one answering in 2.5 s (under the 3 s
/// timeout) and one failing twice with 500.
pub fn receiver_faults(
    cluster: &mut Cluster,
    cx: &Context,
    report: &mut Report,
) -> anyhow::Result<()> {
    const S: &str = "receiver down / slow / failing";
    let customer = cluster.customer("Chaos receivers")?;
    cx.receiver.set("flaky", Behaviour::FailFirst(2));
    cx.receiver
        .set("slow", Behaviour::Slow(Duration::from_millis(2500)));
    let down = crate::servers::free_port()?;
    let critical = &["finding_critical"];
    let flaky = cx.subscribe(&customer, "flaky", critical)?;
    let slow = cx.subscribe(&customer, "slow", critical)?;
    let down_sub = cx.subscribe_at(
        &customer,
        "down",
        &format!("http://127.0.0.1:{down}/hook/down"),
        critical,
    )?;
    cluster.ingest(&customer, "r", 4)?;
    std::thread::sleep(Duration::from_secs(10));
    let listener = TcpListener::bind(("127.0.0.1", down))?;
    let second = cx.receiver.serve(listener)?;
    cluster.drained(&customer, Duration::from_secs(60))?;
    let row = |sub: &str| -> anyhow::Result<(i64, String, f64)> {
        let text = cluster.psql(&format!(
            "SELECT attempts || '|' || status || '|' || \
             extract(epoch FROM delivered_at - created_at) \
             FROM webhook_deliveries WHERE subscription_id = '{sub}'"
        ))?;
        let mut parts = text.split('|');
        Ok((
            parts.next().unwrap_or("0").parse()?,
            parts.next().unwrap_or("").to_owned(),
            parts.next().unwrap_or("0").parse().unwrap_or(f64::NAN),
        ))
    };
    let (attempts, status, _) = row(&flaky)?;
    report.check(
        S,
        "500, 500, then 204: attempts",
        attempts,
        "3, delivered",
        attempts == 3 && status == "delivered",
    );
    let (attempts, status, took) = row(&slow)?;
    report.check(
        S,
        "204 after 2.5 s (timeout 3 s): attempts",
        attempts,
        "1, delivered",
        attempts == 1 && status == "delivered",
    );
    report.info(
        S,
        "slow receiver: queued to delivered",
        format!("{took:.1} s"),
    );
    let (attempts, status, took) = row(&down_sub)?;
    report.check(
        S,
        "down 10 s (retry base 1 s): attempts",
        attempts,
        "4, delivered",
        attempts == 4 && status == "delivered",
    );
    // Delays 1, 4 and 16 s, each ±20 %.
    report.check(
        S,
        "down 10 s: queued to delivered",
        format!("{took:.1} s"),
        "16.8–25.2 s (1+4+16 s ±20 %) + ≤ 1 s polling",
        (16.8..=26.2).contains(&took),
    );
    let seen = cx.receiver.seen("flaky");
    let same = seen.values().all(|s| s.bodies.len() == 1);
    report.check(
        S,
        "flaky receiver: one id, same bytes on every attempt",
        seen.len(),
        "1 id",
        seen.len() == 1 && same,
    );
    block_on(second.stop(true))?;
    Ok(())
}

/// Ingests a pass of 4 new findings for `customer` and waits until its deliveries are sent
/// (other scenarios check that the worker resumed); returns (queued, time taken).
pub fn deliver_one_pass(
    cluster: &Cluster,
    customer: &Customer,
    prefix: &str,
) -> anyhow::Result<(i64, Duration)> {
    let pass = cluster.ingest(customer, prefix, 4)?;
    let queued = pass["deliveriesQueued"].as_i64().unwrap_or(0);
    let took = cluster.drained(customer, Duration::from_secs(60))?;
    Ok((queued, took))
}
