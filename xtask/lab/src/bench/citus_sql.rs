//! What the small list's statements cost on Citus, posture aside: the statements of a
//! `GET /findings` page (the page's ids, its rows with their identities, `meta.total`) run
//! by pgbench with prepared statements, as posture sends them, and the CPU time of every
//! PostgreSQL node per transaction:
//!
//! - on one node;
//! - on Citus through the coordinator (it plans each statement, deparses it and sends it
//!   to the worker holding the customer's shards, which parses, plans and runs it again);
//! - on Citus on that worker itself (querying from any node: Citus keeps its metadata on
//!   every worker, and a statement on a local shard runs in the same backend).
//!
//! The difference between the first two is Citus's own cost of a routed statement; the
//! third is what taking the coordinator off the read path would save.

use std::time::Duration;

use super::{
    cpu,
    report::Figure,
    sql::{FINDINGS_PAGE, FINDINGS_TOTALS, pgbench},
};

/// pgbench's clients.
const CLIENTS: u32 = 8;

/// Transactions per second and database CPU microseconds per transaction.
pub struct Cost {
    tps: f64,
    cpu_us: f64,
}

/// The list's statements for `customer` against `url`, the CPU summed over `postmasters`.
pub fn cost(
    url: &str,
    customer: &str,
    postmasters: &[u32],
    duration: Duration,
) -> anyhow::Result<Cost> {
    let seconds = |postmasters: &[u32]| -> anyhow::Result<f64> {
        postmasters
            .iter()
            .map(|p| cpu::cluster_seconds(*p))
            .sum::<anyhow::Result<f64>>()
    };
    let script = format!("{FINDINGS_PAGE}{FINDINGS_TOTALS}");
    let before = seconds(postmasters)?;
    let tps = pgbench(
        url,
        "citus-list",
        &script,
        &[("c", customer), ("o", "0")],
        CLIENTS,
        duration,
    )?;
    let used = seconds(postmasters)? - before;
    let transactions = (tps * duration.as_secs_f64()).max(1.0);
    Ok(Cost {
        tps,
        cpu_us: used * 1e6 / transactions,
    })
}

/// The figures: each Citus way against one node.
pub fn figures(one: &Cost, coordinator: &Cost, worker: &Cost, figures: &mut Vec<Figure>) {
    let name = format!("the small list's statements (pgbench, prepared, {CLIENTS} clients)");
    let baseline = "one PostgreSQL node, same machine and data";
    for (way, cost) in [
        ("Citus through the coordinator", coordinator),
        (
            "Citus on the worker holding the customer (query from any node)",
            worker,
        ),
    ] {
        figures.push(
            Figure::measure(
                format!("{name}: CPU per transaction, every node, {way}"),
                cost.cpu_us,
                "µs",
                true,
            )
            .against(one.cpu_us, baseline, None),
        );
        figures.push(
            Figure::measure(format!("{name}: throughput, {way}"), cost.tps, "tps", false)
                .against(one.tps, baseline, None),
        );
    }
}
