//! Scale-out on one machine (docs/scaling.md): the small-customer list served by one API
//! instance, then by two sharing the same connections between them, then by one reading a
//! streaming replica. On one 2-core machine that also runs PostgreSQL and wrk, neither can
//! add CPU; the figures show what an instance or a replica costs, that the instances share
//! nothing but the database, and how fast reads leave a replica that stops replaying.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use posture_test_support::servers::PostgresServer;

use super::{
    Figure,
    http::{Load, Server, wrk},
    load::Loaded,
};
use crate::{
    files::scratch_dir,
    process::{eprintln_status, psql_value},
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

/// One instance, then two, on the small-customer list with [`CONNECTIONS`] in all; returns
/// the one-instance throughput.
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

/// The read-replica settings of the measured instance.
const REPLICA_MAX_LAG: Duration = Duration::from_millis(1000);
const REPLICA_CHECK: Duration = Duration::from_millis(100);

/// One API instance whose reads go to a streaming replica of the database (a hot standby
/// on the same machine, made with `pg_basebackup`): the small-customer list with
/// [`CONNECTIONS`], against `on_primary` (an instance reading the primary) measured just
/// before and just after it, with the standby running; then how long after the replica's
/// replay stops the reads are back on the primary. A `smoke` run goes on when the standby
/// fell behind during the measured run (it checks the scenario, not the figure).
#[expect(
    clippy::too_many_arguments,
    reason = "the bench's shared parts, as api_instances takes them, and whether it is a smoke run"
)]
pub fn read_replica(
    bin: &Path,
    primary: &PostgresServer,
    on_primary: &Server,
    pool_size: Option<u32>,
    loaded: &Loaded,
    duration: Duration,
    smoke: bool,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    eprintln_status("starting a streaming replica of the database (pg_basebackup)");
    let started = Instant::now();
    let standby = primary.start_standby(&scratch_dir("bench-standby")?)?;
    let copied = started.elapsed();
    let server = Server::start_with(
        bin,
        &primary.url,
        None,
        pool_size,
        &[
            ("POSTURE_DATABASE_READ_URL", standby.url.as_str()),
            (
                "POSTURE_REPLICA_MAX_LAG_MS",
                &REPLICA_MAX_LAG.as_millis().to_string(),
            ),
            (
                "POSTURE_REPLICA_CHECK_MS",
                &REPLICA_CHECK.as_millis().to_string(),
            ),
        ],
    )?;
    wait_for_usable(&server.base, true)?;
    let key = &loaded.small.key;
    wrk_together(&[&server.base], key, CONNECTIONS, Duration::from_secs(3))?;
    // Mirrored: primary, replica, replica, primary (a drift of the machine favours neither).
    let primary_first = wrk_together(&[&on_primary.base], key, CONNECTIONS, duration)?;
    let replica_first = wrk_together(&[&server.base], key, CONNECTIONS, duration)?;
    let replica_second = wrk_together(&[&server.base], key, CONNECTIONS, duration)?;
    let primary_second = wrk_together(&[&on_primary.base], key, CONNECTIONS, duration)?;
    let on_replica = Load::mean(&replica_first, &replica_second);
    let one_instance = Load::mean(&primary_first, &primary_second).requests_per_second;
    if !replica_usable(&server.base)? {
        // A smoke run checks that the scenario runs; on a loaded 2-core machine a standby
        // may fall behind the bound while the debug build is measured.
        anyhow::ensure!(smoke, "the replica was skipped during the measured run");
        eprintln_status(
            "the replica was skipped during the measured run (a smoke run: its figures are \
             not a measure)",
        );
    }
    let name = format!("small-customer list, {CONNECTIONS} conn");
    figures.push(
        Figure::measure(
            format!("{name}: one API instance reading a streaming replica (same machine)"),
            on_replica.requests_per_second,
            "req/s",
            false,
        )
        .against(one_instance, "one instance on the primary", None),
    );
    figures.push(Figure::measure(
        format!("{name}: one API instance reading a streaming replica, p99"),
        on_replica.p99_ms,
        "ms",
        true,
    ));
    figures.push(Figure::measure(
        "streaming replica of the benchmark database: base backup and start",
        copied.as_secs_f64(),
        "s",
        true,
    ));

    // The switch: the replica's last replayed commit made recent, its replay paused, one
    // more commit on the primary; the reads leave the replica once its lag passes the bound.
    // A heartbeat counts only if the replica replayed it at once: behind a backlog (the
    // primary's vacuum after the earlier stages), its commit would already be old, and the
    // switch would measure the backlog instead (seen once: 173 ms, the lag at 9.3 s).
    let psql = |url: &str, sql: &str| psql_value(url, sql);
    psql(
        &primary.url,
        "CREATE TABLE IF NOT EXISTS bench_heartbeat (at timestamptz); SELECT 1",
    )?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        psql(
            &primary.url,
            "INSERT INTO bench_heartbeat VALUES (now()); SELECT 1",
        )?;
        let beat = Instant::now();
        let written = psql(&primary.url, "SELECT pg_current_wal_lsn()")?;
        while psql(
            &standby.url,
            &format!("SELECT pg_last_wal_replay_lsn() >= '{written}'::pg_lsn"),
        )? != "t"
        {
            anyhow::ensure!(Instant::now() < deadline, "the replica did not catch up");
            std::thread::sleep(Duration::from_millis(10));
        }
        if beat.elapsed() < Duration::from_millis(200) {
            break;
        }
    }
    psql(&standby.url, "SELECT pg_wal_replay_pause()")?;
    let paused = Instant::now();
    psql(
        &primary.url,
        "INSERT INTO bench_heartbeat VALUES (now()); SELECT 1",
    )?;
    wait_for_usable(&server.base, false)?;
    let switched = paused.elapsed();
    figures.push(
        Figure::measure(
            format!(
                "reads back on the primary after the replica's replay paused (bound {} ms, \
                 checked every {} ms)",
                REPLICA_MAX_LAG.as_millis(),
                REPLICA_CHECK.as_millis()
            ),
            switched.as_secs_f64() * 1000.0,
            "ms",
            true,
        )
        .target((REPLICA_MAX_LAG + 2 * REPLICA_CHECK).as_secs_f64() * 1000.0),
    );
    psql(&standby.url, "SELECT pg_wal_replay_resume()")?;
    psql(&primary.url, "DROP TABLE bench_heartbeat; SELECT 1")?;
    drop(server);
    drop(standby);
    Ok(())
}

/// Whether the first replica is in use, from the instance's `/metrics`.
fn replica_usable(base: &str) -> anyhow::Result<bool> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let text = runtime.block_on(async {
        reqwest::get(format!("{base}/metrics"))
            .await?
            .error_for_status()?
            .text()
            .await
    })?;
    Ok(text
        .lines()
        .any(|line| line == "posture_db_replica_usable{replica=\"1\"} 1"))
}

fn wait_for_usable(base: &str, usable: bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while replica_usable(base)? != usable {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the replica's use did not become {usable}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}
