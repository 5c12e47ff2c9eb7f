//! The checks and helpers of the Citus high-availability scenarios (`citus_ha.rs`): what
//! the affected customers saw, the writes' answers, the deliveries queued before a loss.

use std::time::Duration;

use super::{
    Context,
    citus::during,
    cluster::{Cluster, Customer},
    failover::Loss,
    patroni::TTL_SECS,
    receiver::Behaviour,
    report::{Report, secs},
    traffic::{Sample, Summary, recovery_after},
    writers::Written,
};

/// The customers' tag (their hooks are `{TAG}-{i}`).
pub(super) const TAG: &str = "ha";
/// Service is back this soon after a primary is lost: the leader lock's TTL, a Patroni loop
/// to promote and one more for the coordinator to update `pg_dist_node`, and slack.
pub(super) const RECOVERY_BOUND: Duration = Duration::from_secs(2 * TTL_SECS + 10);

/// The checks of the customers whose node went: 503 with `Retry-After` only meanwhile, and
/// 200 again within the bound (a switchover may cost nothing).
pub(super) fn affected(
    scenario: &'static str,
    report: &mut Report,
    samples: &[Sample],
    down: Duration,
    loss: Loss,
) {
    let after = during(samples, down, Duration::MAX);
    report.info(
        scenario,
        "the affected customers' requests from the loss on, per status",
        format!("{:?}", after.statuses),
    );
    report.check(
        scenario,
        "the affected customers: 503 without Retry-After / 500 and others / no answer",
        format!(
            "{} / {} / {} of {}",
            after.unavailable_without_retry_after,
            after.other_errors,
            after.no_response,
            after.requests
        ),
        "0 / 0 / 0",
        after.requests > 0
            && after.unavailable_without_retry_after == 0
            && after.other_errors == 0
            && after.no_response == 0,
    );
    let instances: Vec<usize> = samples.iter().map(|s| s.instance).collect();
    for instance in 0..=instances.iter().copied().max().unwrap_or(0) {
        let mine: Vec<Sample> = samples
            .iter()
            .filter(|s| s.instance == instance)
            .cloned()
            .collect();
        let back = recovery_after(&mine, down);
        report.check(
            scenario,
            &format!("instance {instance}: the affected customers back to 200 after"),
            back.map_or_else(|| "never".to_owned(), secs),
            match loss {
                Loss::Killed => "≤ 30 s, without restarting posture",
                Loss::Switchover => "≤ 30 s (a pause, or nothing)",
            },
            back.is_some_and(|b| b <= RECOVERY_BOUND),
        );
    }
    let summary = Summary::of(samples.iter().filter(|s| s.sent >= down));
    report.info(
        scenario,
        "the affected customers' longest request from the loss on",
        secs(summary.max_latency),
    );
}

/// Acknowledged triage and SCIM writes not in the database, and the writes' answers that
/// were server errors (the subscriptions', the triages' and SCIM's).
pub(super) fn writes_checked(
    scenario: &'static str,
    report: &mut Report,
    (triages, scim): (Written, Written),
    subscription_errors: usize,
) {
    for (measure, (lost, acknowledged, _)) in [
        (
            "acknowledged triage writes lost (PATCH /findings/{id})",
            triages,
        ),
        (
            "acknowledged SCIM writes lost (users created, deactivated, reactivated, deleted)",
            scim,
        ),
    ] {
        report.check(
            scenario,
            measure,
            format!("{lost} of {acknowledged}"),
            "0",
            lost == 0 && acknowledged > 0,
        );
    }
    report.check(
        scenario,
        "writes answered with a server error other than 503 (subscriptions / triages / SCIM)",
        format!("{subscription_errors} / {} / {}", triages.2, scim.2),
        "0 / 0 / 0",
        subscription_errors == 0 && triages.2 == 0 && scim.2 == 0,
    );
}

/// The receiver answers `these` customers' deliveries after 1.5 s (`slow`), or at once.
pub(super) fn slow(cx: &Context, customers: &[Customer], these: &[&Customer], slow: bool) {
    for (i, customer) in customers.iter().enumerate() {
        if these.iter().any(|c| c.id == customer.id) {
            let behaviour = if slow {
                Behaviour::Slow(Duration::from_millis(1500))
            } else {
                Behaviour::Ok
            };
            // The hook `customers` subscribed it to.
            cx.receiver.set(&format!("{TAG}-{i}"), behaviour);
        }
    }
}

/// Deliveries still pending when the node went: the check that they were in flight.
pub(super) fn in_flight(scenario: &'static str, report: &mut Report, pending: i64, queued: i64) {
    report.check(
        scenario,
        "deliveries queued just before: pending at the loss",
        format!("{pending} of {queued}"),
        "some (in flight)",
        pending > 0,
    );
}

/// The customers' deliveries not yet delivered.
pub(super) fn pending(cluster: &Cluster, customers: &[&Customer]) -> anyhow::Result<i64> {
    customers
        .iter()
        .map(|c| cluster.outbox(c).map(|o| o.0))
        .sum()
}

/// The deliveries queued before the loss: all delivered, none failed.
pub(super) fn drained(
    cluster: &Cluster,
    scenario: &'static str,
    report: &mut Report,
    customers: &[&Customer],
    queued: i64,
) -> anyhow::Result<()> {
    let mut all = true;
    let mut failed = 0;
    for customer in customers {
        all &= cluster.drained(customer, Duration::from_secs(90)).is_ok();
        failed += cluster.outbox(customer)?.2;
    }
    report.check(
        scenario,
        "deliveries queued just before the loss: delivered / failed",
        format!(
            "{} / {failed} of {queued}",
            if all { "all" } else { "not all" }
        ),
        "all / 0",
        all && failed == 0 && queued > 0,
    );
    Ok(())
}
