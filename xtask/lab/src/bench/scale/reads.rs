//! The read routes at both sizes: throughput, p99 and CPU per request.

use std::{process::Command, time::Duration};

use anyhow::Context as _;

use super::{CONNECTIONS, READ_FLAT, Scaled, Setup, mirrored};
use crate::{
    bench::{
        cpu::CpuSample,
        http::{Load, wrk},
    },
    process::{eprintln_status, output, psql_value},
};

/// The cursor of the largest customer's last page (from the page before it).
fn last_page(s: &Setup) -> anyhow::Result<String> {
    let depth = s.largest.findings.saturating_sub(200);
    let text = output(Command::new("curl").args([
        "-sf",
        "-H",
        &format!("Authorization: Bearer {}", s.largest.key),
        &format!("{}/api/v1/findings?limit=100&offset={depth}", s.server.base),
    ]))?;
    let page: serde_json::Value = serde_json::from_str(&text)?;
    let cursor = page["meta"]["nextCursor"]
        .as_str()
        .context("no cursor before the last page")?;
    Ok(format!(
        "{}/api/v1/findings?limit=100&after={cursor}",
        s.server.base
    ))
}

/// A measured route: what it is, and its URL and key at each size.
type Route = (&'static str, [(String, String); 2]);

/// The routes measured.
fn routes(setups: &[Setup; 2]) -> anyhow::Result<Vec<Route>> {
    let list = "/api/v1/findings?severity=critical,high&status=open&limit=100";
    let mut routes: Vec<Route> = Vec::new();
    let each = |f: &dyn Fn(&Setup) -> anyhow::Result<(String, String)>| {
        Ok::<_, anyhow::Error>([f(&setups[0])?, f(&setups[1])?])
    };
    routes.push((
        "GET /findings crit+high open, small customer, first page",
        each(&|s| Ok((format!("{}{list}", s.server.base), s.small.key.clone())))?,
    ));
    routes.push((
        "GET /findings crit+high open, largest customer (10% of the rows), first page",
        each(&|s| Ok((format!("{}{list}", s.server.base), s.largest.key.clone())))?,
    ));
    routes.push((
        "GET /findings, largest customer, its last page by cursor",
        each(&|s| Ok((last_page(s)?, s.largest.key.clone())))?,
    ));
    routes.push((
        "GET /findings/{id}, largest customer",
        each(&|s| {
            let id = psql_value(
                &s.postgres.url,
                &format!(
                    "SELECT id FROM findings WHERE customer_id = '{}' ORDER BY id \
                     OFFSET 1000 LIMIT 1",
                    s.largest.id
                ),
            )?;
            Ok((
                format!("{}/api/v1/findings/{id}", s.server.base),
                s.largest.key.clone(),
            ))
        })?,
    ));
    routes.push((
        "GET /identities, largest customer (2,500 identities)",
        each(&|s| {
            Ok((
                format!("{}/api/v1/identities?limit=100", s.server.base),
                s.largest.key.clone(),
            ))
        })?,
    ));
    Ok(routes)
}

/// The read routes: throughput, p99 and CPU per request of posture-api and PostgreSQL.
pub(super) fn reads(
    setups: &[Setup; 2],
    duration: Duration,
    scaled: &mut Scaled<'_>,
) -> anyhow::Result<()> {
    for (what, targets) in routes(setups)? {
        eprintln_status(&format!("scale: {what}"));
        for (url, key) in &targets {
            wrk(url, key, CONNECTIONS, Duration::from_secs(2))?;
        }
        let mut loads: [Vec<Load>; 2] = [Vec::new(), Vec::new()];
        let mut cpu: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
        mirrored(setups, |i, s| {
            let (url, key) = &targets[i];
            let before = CpuSample::take(s.server.pid(), s.postmaster)?;
            let load = wrk(url, key, CONNECTIONS, duration)?;
            let requests = load.requests_per_second * duration.as_secs_f64();
            cpu[i].push(
                CpuSample::take(s.server.pid(), s.postmaster)?.per_request_since(&before, requests),
            );
            let rate = load.requests_per_second;
            loads[i].push(load);
            Ok(rate)
        })?;
        let mean = |i: usize| Load::mean(&loads[i][0], &loads[i][1]);
        let (small, large) = (mean(0), mean(1));
        let what = format!("{what}, {CONNECTIONS} conn");
        scaled.push(
            &format!("{what}: throughput"),
            [small.requests_per_second, large.requests_per_second],
            "req/s",
            false,
            Some(READ_FLAT),
        );
        scaled.push(
            &format!("{what}: p99"),
            [small.p99_ms, large.p99_ms],
            "ms",
            true,
            None,
        );
        let per = |i: usize, side: usize| {
            let pick = |c: &(f64, f64)| if side == 0 { c.0 } else { c.1 };
            (pick(&cpu[i][0]) + pick(&cpu[i][1])) / 2.0
        };
        for (side, name) in [(0, "posture-api"), (1, "PostgreSQL")] {
            scaled.push(
                &format!("{what}: {name} CPU per request"),
                [per(0, side), per(1, side)],
                "µs",
                true,
                None,
            );
        }
    }
    Ok(())
}
