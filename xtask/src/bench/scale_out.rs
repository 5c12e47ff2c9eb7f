//! Scale-out on one machine (docs/scaling.md): the small-customer list served by one API
//! instance, then by two sharing the same connections between them. On one 2-core machine
//! that also runs PostgreSQL and wrk, two instances cannot add CPU; the figure shows what an
//! instance costs and that the instances share nothing but the database.

use std::{path::Path, time::Duration};

use super::{
    Figure,
    http::{Load, Server, wrk},
    load::Loaded,
};

const PATH: &str = "/api/v1/findings?severity=critical,high&status=open&limit=100&offset=0";

/// wrk against several instances at once, `connections` in all; their throughputs add up.
fn wrk_together(
    bases: &[&str],
    key: &str,
    connections: u32,
    duration: Duration,
) -> anyhow::Result<Load> {
    let share = (connections / bases.len() as u32).max(1);
    let loads = std::thread::scope(|scope| {
        let runs: Vec<_> = bases
            .iter()
            .map(|base| {
                let url = format!("{base}{PATH}");
                scope.spawn(move || wrk(&url, key, share, duration))
            })
            .collect();
        runs.into_iter()
            .map(|run| {
                run.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("wrk thread panicked")))
            })
            .collect::<anyhow::Result<Vec<Load>>>()
    })?;
    Ok(Load {
        requests_per_second: loads.iter().map(|l| l.requests_per_second).sum(),
        p50_ms: loads.iter().map(|l| l.p50_ms).fold(0.0, f64::max),
        p99_ms: loads.iter().map(|l| l.p99_ms).fold(0.0, f64::max),
    })
}

/// Connections in all, one instance or two.
const CONNECTIONS: u32 = 16;

/// One instance, then two, on the small-customer list with [`CONNECTIONS`] in all.
pub fn api_instances(
    bin: &Path,
    first: &Server,
    database_url: &str,
    pool_size: Option<u32>,
    loaded: &Loaded,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let key = &loaded.small.key;
    let connections = CONNECTIONS;
    let second = Server::start(bin, database_url, None, pool_size)?;
    // Warm both (connections opened, statements prepared).
    wrk_together(
        &[&first.base, &second.base],
        key,
        connections,
        Duration::from_secs(3),
    )?;
    let one = wrk_together(&[&first.base], key, connections, duration)?;
    let two = wrk_together(&[&first.base, &second.base], key, connections, duration)?;
    let one_again = wrk_together(&[&first.base], key, connections, duration)?;
    let one = Load::mean(&one, &one_again);
    let name = format!("small-customer list, {connections} conn");
    figures.push(Figure::measure(
        format!("{name}: one API instance"),
        one.requests_per_second,
        "req/s",
        false,
    ));
    figures.push(
        Figure::measure(
            format!("{name}: two API instances (same machine), together"),
            two.requests_per_second,
            "req/s",
            false,
        )
        .against(one.requests_per_second, "one instance", None),
    );
    figures.push(Figure::measure(
        format!("{name}: two API instances, p99"),
        two.p99_ms,
        "ms",
        true,
    ));
    Ok(())
}
