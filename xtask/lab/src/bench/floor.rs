//! The floors under the CPU per request (docs/performance.md, "Overhead per request"): what
//! `posture-api`'s HTTP layer costs with nothing behind it (`GET /healthz`), and what the
//! database client alone costs for a route's statements: tokio-postgres, the driver under
//! diesel-async, on two current-thread runtimes as in posture-api's two HTTP workers, each
//! task holding a connection for its request as a pooled one is held, the statements
//! prepared, every column of every row decoded into an owned value (the text checked as
//! UTF-8) and nothing else: no HTTP, no JSON, no domain types. The two apart show where a
//! request's CPU goes; their sum is under what a server of these parts spends (it leaves out
//! the wake-ups of a server waiting on PostgreSQL), so the targets are judged against the
//! whole server of `floor_server.rs`, which uses this client's statements.

use std::{
    io::Write as _,
    path::Path,
    process::Command,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use tokio_postgres::{
    Client, NoTls, Statement,
    types::{FromSql, Type},
};

use super::{
    Figure,
    cpu::CpuSample,
    http::{Server, wrk},
    load::Loaded,
};
use crate::process::output;

/// Concurrent requests, as the read routes' runs at 16 connections.
pub(super) const CONCURRENCY: usize = 16;
/// posture-api's HTTP workers on 2 cores, and the connections of each (pool 4 / 2 workers).
pub(super) const WORKERS: usize = 2;
pub(super) const CONNECTIONS_PER_WORKER: usize = 2;

/// The small-customer list's statements as posture sends them (the server's statement log):
/// the page's ids with their sort keys, pipelined with the total; then the rows.
const LIST_IDS: &str = "SELECT id, severity_rank, detected_at FROM findings \
    WHERE customer_id = $1::text::uuid AND severity_rank = ANY($2) AND status = ANY($3) \
    ORDER BY severity_rank, detected_at DESC, id LIMIT 101 OFFSET 0";
const LIST_TOTAL: &str = "SELECT sum(total)::int8 FROM finding_totals \
    WHERE customer_id = $1::text::uuid AND severity = ANY($2) AND status = ANY($3)";
const ROWS: &str = "SELECT f.id, f.cloud_tenant_id, f.finding_type, f.severity, f.status, \
    f.title, f.description, f.detected_at, f.updated_at, f.modified_at, f.triage_state, \
    f.triage_reason, f.triage_comment, f.triage_expires_at, f.triage_updated_at, \
    f.triage_key_id, f.triage_key_name, i.id, i.display_name, i.kind, i.cloud_tenant_id \
    FROM findings f LEFT JOIN identities i \
    ON i.customer_id = f.customer_id AND i.id = f.identity_id \
    WHERE f.customer_id = $1::text::uuid AND f.id = ANY($2)";

/// The same page in one statement: the deferred join inside PostgreSQL (not what posture
/// sends; measured beside it, docs/performance.md).
const LIST_ONE: &str = "SELECT f.id, f.cloud_tenant_id, f.finding_type, f.severity, f.status, \
    f.title, f.description, f.detected_at, f.updated_at, f.modified_at, f.triage_state, \
    f.triage_reason, f.triage_comment, f.triage_expires_at, f.triage_updated_at, \
    f.triage_key_id, f.triage_key_name, i.id, i.display_name, i.kind, i.cloud_tenant_id \
    FROM findings f LEFT JOIN identities i \
    ON i.customer_id = f.customer_id AND i.id = f.identity_id \
    WHERE f.customer_id = $1::text::uuid AND f.id IN (SELECT id FROM findings \
    WHERE customer_id = $1::text::uuid AND severity_rank = ANY($2) AND status = ANY($3) \
    ORDER BY severity_rank, detected_at DESC, id LIMIT 101 OFFSET 0) \
    ORDER BY f.severity_rank, f.detected_at DESC, f.id";

const DETAIL: &str = "SELECT f.id, f.cloud_tenant_id, f.finding_type, f.severity, f.status, \
    f.title, f.description, f.detected_at, f.updated_at, f.modified_at, f.triage_state, \
    f.triage_reason, f.triage_comment, f.triage_expires_at, f.triage_updated_at, \
    f.triage_key_id, f.triage_key_name, i.id, i.display_name, i.kind, i.cloud_tenant_id \
    FROM findings f LEFT JOIN identities i \
    ON i.customer_id = f.customer_id AND i.id = f.identity_id \
    WHERE f.customer_id = $1::text::uuid AND f.id = $2";

/// A column's value copied out of the row: what any decoding costs at least.
struct Owned(#[expect(dead_code, reason = "held to be dropped, as a decoded value is")] Vec<u8>);

impl<'a> FromSql<'a> for Owned {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Owned(raw.to_vec()))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// Runs the HTTP floor and the database client's floors (the client from the release build
/// of posture-lab in `bin_dir`); records each beside PostgreSQL's CPU for the same work.
pub fn run(
    bin_dir: &Path,
    server: &Server,
    database_url: &str,
    postmaster: u32,
    loaded: &Loaded,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let url = format!("{}/healthz", server.base);
    wrk(
        &url,
        &loaded.small.key,
        CONCURRENCY as u32,
        Duration::from_secs(1),
    )?;
    let before = CpuSample::take(server.pid(), postmaster)?;
    let load = wrk(&url, &loaded.small.key, CONCURRENCY as u32, duration)?;
    let requests = load.requests_per_second * duration.as_secs_f64();
    let (http, _) = CpuSample::take(server.pid(), postmaster)?.per_request_since(&before, requests);
    figures.push(Figure::measure(
        format!(
            "floor: posture-api CPU per request of GET /healthz (HTTP alone), {CONCURRENCY} conn"
        ),
        http,
        "µs",
        true,
    ));
    let detail_id = super::http::detail_id(database_url, loaded)?;
    for (name, work, customer, finding) in [
        (
            "small-customer list's 3 statements",
            Work::List,
            &loaded.small.id,
            None,
        ),
        (
            "GET /findings/{id}'s statement",
            Work::Detail,
            &loaded.largest.id,
            Some(detail_id.as_str()),
        ),
    ] {
        let client = |seconds: u64| -> anyhow::Result<(f64, f64)> {
            let mut command = Command::new(bin_dir.join("posture-lab"));
            command
                .args(["bench-floor", "--url", database_url])
                .args(["--postmaster", &postmaster.to_string()])
                .args(["--customer", customer])
                .args(["--seconds", &seconds.to_string()])
                .arg("--work")
                .arg(match work {
                    Work::List => "list",
                    Work::Detail => "detail",
                });
            if let Some(finding) = finding {
                command.args(["--finding", finding]);
            }
            let text = output(&mut command)?;
            let measured: serde_json::Value = serde_json::from_str(text.trim())
                .with_context(|| format!("the floor's client printed {text:?}"))?;
            let value = |field: &str| measured[field].as_f64().context("the floor's figures");
            Ok((value("client_us")?, value("database_us")?))
        };
        client(1)?;
        let (alone, database) = client(duration.as_secs())?;
        figures.push(
            Figure::measure(
                format!("floor: database client alone (tokio-postgres), {name}: CPU per request"),
                alone,
                "µs",
                true,
            )
            .against(database, "PostgreSQL's CPU for the same statements", None),
        );
    }
    Ok(())
}

/// The work of the floor's client.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Work {
    /// The small-customer list's three statements.
    List,
    /// The detail route's statement.
    Detail,
}

/// `posture-lab bench-floor` (hidden): the database client's floor, run by the bench from
/// the release build; prints `{"client_us", "database_us"}`.
#[derive(Args, Debug)]
pub struct FloorArgs {
    #[arg(long)]
    pub(super) url: String,
    /// The cluster's postmaster, whose CPU is measured with the client's.
    #[arg(long)]
    pub(super) postmaster: u32,
    #[arg(long, value_enum)]
    pub(super) work: Work,
    #[arg(long)]
    pub(super) customer: String,
    /// The finding of `--work detail`.
    #[arg(long)]
    pub(super) finding: Option<String>,
    #[arg(long, default_value_t = 6)]
    pub(super) seconds: u64,
    /// Serve the routes' work over HTTP on this port instead (`floor_server.rs`), until
    /// stopped.
    #[arg(long)]
    pub(super) serve: Option<u16>,
}

pub fn run_client(args: &FloorArgs) -> anyhow::Result<()> {
    let request = match args.work {
        Work::List => Request::List(args.customer.clone()),
        Work::Detail => Request::Detail(
            args.customer.clone(),
            args.finding
                .clone()
                .context("--work detail needs --finding")?,
        ),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (client, database) = runtime.block_on(drive(
        &args.url,
        &request,
        Duration::from_secs(args.seconds),
        args.postmaster,
    ))?;
    let figures = serde_json::json!({"client_us": client, "database_us": database});
    writeln!(std::io::stdout().lock(), "{figures}")?;
    Ok(())
}

#[derive(Clone)]
pub(super) enum Request {
    /// The customer's id.
    List(String),
    /// The customer's id: its list in one statement ([`LIST_ONE`]).
    ListInOne(String),
    /// The customer's id and a finding's.
    Detail(String, String),
}

/// One connection with the statements prepared.
pub(super) struct Prepared {
    client: Client,
    ids: Statement,
    total: Statement,
    rows: Statement,
    list_one: Statement,
    detail: Statement,
}

impl Prepared {
    pub(super) async fn connect(url: &str) -> anyhow::Result<Self> {
        let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
        // On the runtime that opened it, as posture-api's worker pools keep theirs.
        tokio::task::spawn_local(async move {
            let _ = connection.await;
        });
        Ok(Self {
            ids: client.prepare(LIST_IDS).await?,
            total: client.prepare(LIST_TOTAL).await?,
            rows: client.prepare(ROWS).await?,
            list_one: client.prepare(LIST_ONE).await?,
            detail: client.prepare(DETAIL).await?,
            client,
        })
    }

    /// One request's statements, every column decoded.
    async fn request(&self, work: &Request) -> anyhow::Result<()> {
        decode(&self.rows_of(work).await?)
    }

    /// The rows of one request's statements (a list's: its page of 100).
    pub(super) async fn rows_of(&self, work: &Request) -> anyhow::Result<Vec<tokio_postgres::Row>> {
        match work {
            Request::List(customer) => {
                let ids = self.with_total(&self.ids, customer).await?;
                let mut page = Vec::with_capacity(ids.len());
                for row in &ids {
                    let id: String = row.try_get(0)?;
                    let _: Owned = row.try_get(1)?;
                    let _: Owned = row.try_get(2)?;
                    page.push(id);
                }
                page.truncate(100);
                Ok(self.client.query(&self.rows, &[customer, &page]).await?)
            }
            Request::ListInOne(customer) => {
                let mut rows = self.with_total(&self.list_one, customer).await?;
                rows.truncate(100);
                Ok(rows)
            }
            Request::Detail(customer, id) => {
                let rows = self.client.query(&self.detail, &[customer, id]).await?;
                anyhow::ensure!(rows.len() == 1, "the finding was not found");
                Ok(rows)
            }
        }
    }

    /// A list's `statement` (critical and high, open) pipelined with its total, as posture
    /// sends them; the statement's rows.
    async fn with_total(
        &self,
        statement: &Statement,
        customer: &String,
    ) -> anyhow::Result<Vec<tokio_postgres::Row>> {
        let ranks: &[i16] = &[1, 2];
        let severities: &[&str] = &["critical", "high"];
        let statuses: &[&str] = &["open"];
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [customer, &ranks, &statuses];
        let total_params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [customer, &severities, &statuses];
        let rows = self.client.query(statement, &params);
        let total = self.client.query_one(&self.total, &total_params);
        let (rows, total) = futures_util::future::try_join(rows, total).await?;
        let _: Option<i64> = total.try_get(0)?;
        Ok(rows)
    }
}

/// Every column of the rows, as owned values, the text ones checked as UTF-8.
fn decode(rows: &[tokio_postgres::Row]) -> anyhow::Result<()> {
    const TEXT: [usize; 13] = [0, 2, 3, 4, 5, 6, 10, 11, 12, 16, 17, 18, 19];
    for row in rows {
        for column in 0..row.len() {
            if TEXT.contains(&column) {
                let _: Option<String> = row.try_get(column)?;
            } else {
                let _: Option<Owned> = row.try_get(column)?;
            }
        }
    }
    Ok(())
}

/// Runs `work` for `duration` on [`WORKERS`] threads with a current-thread runtime each;
/// returns the client's and the cluster's CPU per request, in µs.
async fn drive(
    url: &str,
    work: &Request,
    duration: Duration,
    postmaster: u32,
) -> anyhow::Result<(f64, f64)> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<()>>();
    let (go_tx, go_rx) = tokio::sync::watch::channel(false);
    for _ in 0..WORKERS {
        let (url, work, stop, done) = (url.to_owned(), work.clone(), stop.clone(), done.clone());
        let (ready, mut go) = (ready_tx.clone(), go_rx.clone());
        threads.push(std::thread::spawn(move || -> anyhow::Result<()> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, async move {
                let mut connections = Vec::new();
                for _ in 0..CONNECTIONS_PER_WORKER {
                    match Prepared::connect(&url).await {
                        Ok(c) => connections.push(Arc::new(tokio::sync::Mutex::new(c))),
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return Ok(());
                        }
                    }
                }
                let _ = ready.send(Ok(()));
                go.wait_for(|go| *go).await?;
                let tasks: Vec<_> = (0..CONCURRENCY / WORKERS)
                    .map(|i| {
                        let connection = connections[i % connections.len()].clone();
                        let (work, stop, done) = (work.clone(), stop.clone(), done.clone());
                        tokio::task::spawn_local(async move {
                            while !stop.load(Ordering::Relaxed) {
                                // Held for the request, as a pooled connection is.
                                connection.lock().await.request(&work).await?;
                                done.fetch_add(1, Ordering::Relaxed);
                            }
                            anyhow::Ok(())
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await??;
                }
                Ok(())
            })
        }));
    }
    drop(ready_tx);
    for ready in ready_rx.iter().take(WORKERS) {
        ready.context("connecting the floor's client")?;
    }
    let before = CpuSample::take(std::process::id(), postmaster)?;
    go_tx.send(true)?;
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let requests = done.load(Ordering::Relaxed) as f64;
    let cpu = CpuSample::take(std::process::id(), postmaster)?.per_request_since(&before, requests);
    for thread in threads {
        thread
            .join()
            .map_err(|_| anyhow::anyhow!("a floor thread panicked"))??;
    }
    Ok(cpu)
}
