//! The floor under a whole request (docs/performance.md, "The targets, and the floor under
//! them"): a server of posture-api's own parts and nothing else. actix-web with posture's
//! two workers, each holding two tokio-postgres connections opened on its own thread (as
//! posture-api's worker pools do) and lent to one request at a time; `GET /findings` runs
//! the small-customer list's statements as posture sends them (the page's ids pipelined
//! with the total, then the rows; `GET /findings-in-one`: the same page in one statement,
//! the deferred join inside PostgreSQL) and `GET /findings/{id}` the detail's; the rows are
//! written as the API's JSON from the row's own buffers. No key check, rate limit, data
//! version, middleware, diesel or domain types. Measured under wrk like the API, it is
//! what any server of these parts spends on this machine, kernel and wake-ups included
//! (which the client's floor alone, driven from inside, does not pay).

use std::{cell::RefCell, path::Path, process::Command, time::Duration};

use actix_web::{App, HttpResponse, HttpServer, web};
use anyhow::Context as _;
use tokio_postgres::types::{FromSql, Type};

use super::{
    Figure,
    cpu::CpuSample,
    floor::{CONCURRENCY, CONNECTIONS_PER_WORKER, Prepared, Request, WORKERS},
    http::wrk,
    load::Loaded,
};
use crate::binaries::{Guard, wait_until_listening};

/// Runs the server (from the release build of posture-lab in `bin_dir`) and measures both routes
/// under wrk, each beside PostgreSQL's CPU for the same requests.
pub fn run(
    bin_dir: &Path,
    database_url: &str,
    postmaster: u32,
    loaded: &Loaded,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let detail_id = super::http::detail_id(database_url, loaded)?;
    let detail_id = detail_id.as_str();
    for (name, customer, path) in [
        (
            "the small-customer list (its 3 statements, 100 rows as JSON)",
            &loaded.small,
            "/findings".to_owned(),
        ),
        (
            "the same list in one statement (the deferred join inside PostgreSQL)",
            &loaded.small,
            "/findings-in-one".to_owned(),
        ),
        (
            "GET /findings/{id} (its statement, the row as JSON)",
            &loaded.largest,
            format!("/findings/{detail_id}"),
        ),
    ] {
        // A server of the customer's (its `--customer`), stopped after its route's run.
        let port = crate::servers::free_port()?;
        let server = Guard(vec![
            Command::new(bin_dir.join("posture-lab"))
                .args(["bench-floor", "--url", database_url])
                .args(["--postmaster", &postmaster.to_string()])
                .args(["--customer", &customer.id])
                .args(["--work", "list", "--serve", &port.to_string()])
                .spawn()
                .context("starting the floor's server")?,
        ]);
        wait_until_listening(&format!("127.0.0.1:{port}"))?;
        let pid = server.0[0].id();
        let url = format!("http://127.0.0.1:{port}{path}");
        wrk(
            &url,
            &customer.key,
            CONCURRENCY as u32,
            Duration::from_secs(1),
        )?;
        let before = CpuSample::take(pid, postmaster)?;
        let load = wrk(&url, &customer.key, CONCURRENCY as u32, duration)?;
        let requests = load.requests_per_second * duration.as_secs_f64();
        let (cpu, database) =
            CpuSample::take(pid, postmaster)?.per_request_since(&before, requests);
        figures.push(
            Figure::measure(
                format!(
                    "floor: a server of posture-api's parts alone, {name}: CPU per request, \
                     {CONCURRENCY} conn"
                ),
                cpu,
                "µs",
                true,
            )
            .against(database, "PostgreSQL's CPU for the same requests", None),
        );
        figures.push(Figure::measure(
            format!("floor: a server of posture-api's parts alone, {name}: throughput"),
            load.requests_per_second,
            "req/s",
            false,
        ));
    }
    Ok(())
}

/// `bench-floor --serve`: serves `GET /findings` (the customer's list) and
/// `GET /findings/{id}` on 127.0.0.1:`port` until stopped.
pub fn serve(url: &str, customer: &str, port: u16) -> anyhow::Result<()> {
    let (url, customer) = (url.to_owned(), customer.to_owned());
    actix_web::rt::System::new().block_on(async move {
        HttpServer::new(move || {
            // Made on each worker's thread: its connections are its own.
            let pool = web::Data::new(Pool {
                url: url.clone(),
                customer: customer.clone(),
                opened: tokio::sync::OnceCell::new(),
                idle: RefCell::new(Vec::new()),
                lent: tokio::sync::Semaphore::new(CONNECTIONS_PER_WORKER),
            });
            App::new()
                .app_data(pool)
                .route("/findings", web::get().to(list))
                .route("/findings-in-one", web::get().to(list_in_one))
                .route("/findings/{id}", web::get().to(detail))
        })
        .workers(WORKERS)
        // Stopped by the bench once wrk is done: nothing to wait for.
        .shutdown_timeout(1)
        .bind(("127.0.0.1", port))?
        .run()
        .await
    })?;
    Ok(())
}

/// A worker's connections, lent to one request at a time.
struct Pool {
    url: String,
    customer: String,
    opened: tokio::sync::OnceCell<()>,
    idle: RefCell<Vec<Prepared>>,
    lent: tokio::sync::Semaphore,
}

impl Pool {
    /// The rows of `work` on a connection of this worker's, written as JSON.
    async fn body(&self, work: &Request, one: bool) -> anyhow::Result<Vec<u8>> {
        self.opened
            .get_or_try_init(|| async {
                for _ in 0..CONNECTIONS_PER_WORKER {
                    let connection = Prepared::connect(&self.url).await?;
                    self.idle.borrow_mut().push(connection);
                }
                anyhow::Ok(())
            })
            .await?;
        let _permit = self.lent.acquire().await?;
        let connection = self.idle.borrow_mut().pop().context("a lent connection")?;
        let rows = connection.rows_of(work).await;
        self.idle.borrow_mut().push(connection);
        json(&rows?, one)
    }
}

async fn list(pool: web::Data<Pool>) -> HttpResponse {
    respond(
        pool.body(&Request::List(pool.customer.clone()), false)
            .await,
    )
}

async fn list_in_one(pool: web::Data<Pool>) -> HttpResponse {
    respond(
        pool.body(&Request::ListInOne(pool.customer.clone()), false)
            .await,
    )
}

async fn detail(pool: web::Data<Pool>, id: web::Path<String>) -> HttpResponse {
    let work = Request::Detail(pool.customer.clone(), id.into_inner());
    respond(pool.body(&work, true).await)
}

fn respond(body: anyhow::Result<Vec<u8>>) -> HttpResponse {
    match body {
        Ok(body) => HttpResponse::Ok()
            .content_type("application/json")
            .body(body),
        Err(e) => HttpResponse::InternalServerError().body(format!("{e:#}")),
    }
}

/// The rows as the API's body: `{"data": [...]}`, or `{"data": {...}}` for `one`.
fn json(rows: &[tokio_postgres::Row], one: bool) -> anyhow::Result<Vec<u8>> {
    let findings = rows
        .iter()
        .map(Finding::read)
        .collect::<Result<Vec<_>, _>>()?;
    let mut body = Vec::with_capacity(256 + findings.len() * 640);
    if one {
        let finding = findings.first().context("the finding was not found")?;
        serde_json::to_writer(&mut body, &One { data: finding })?;
    } else {
        serde_json::to_writer(&mut body, &Page { data: &findings })?;
    }
    Ok(body)
}

/// A detail's body.
#[derive(serde::Serialize)]
struct One<'a> {
    data: &'a Finding<'a>,
}

/// A uuid column, as its 16 bytes.
struct Id(uuid::Uuid);

impl<'a> FromSql<'a> for Id {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Id(uuid::Uuid::from_slice(raw)?))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::UUID
    }
}

/// A `timestamptz` column (microseconds since 2000-01-01 UTC).
struct Time(chrono::DateTime<chrono::Utc>);

impl<'a> FromSql<'a> for Time {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let micros = i64::from_be_bytes(raw.try_into()?);
        let epoch = chrono::DateTime::from_timestamp(946_684_800, 0).ok_or("epoch")?;
        Ok(Time(epoch + chrono::TimeDelta::microseconds(micros)))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMPTZ
    }
}

impl serde::Serialize for Time {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // posture's own writer of RFC 3339 (without chrono's `Display`).
        posture_wire::time::serialize(&self.0, serializer)
    }
}

impl serde::Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0.hyphenated())
    }
}

/// A list's body, as the API's `{data}` (its `meta` is a few bytes).
#[derive(serde::Serialize)]
struct Page<'a> {
    data: &'a [Finding<'a>],
}

/// A finding as the API writes it, its text borrowed from the row.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Finding<'a> {
    id: &'a str,
    cloud_tenant_id: Id,
    finding_type: &'a str,
    severity: &'a str,
    status: &'a str,
    title: &'a str,
    description: Option<&'a str>,
    identity: Option<Identity<'a>>,
    detected_at: Time,
    updated_at: Time,
    modified_at: Time,
    triage: Triage<'a>,
}

/// A finding's `triage` as the API writes it: a mark past its expiry reads as `untriaged`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Triage<'a> {
    state: &'a str,
    reason: Option<&'a str>,
    comment: Option<&'a str>,
    expires_at: Option<Time>,
    updated_at: Option<Time>,
    updated_by: Option<Actor<'a>>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Actor<'a> {
    key_id: Id,
    name: &'a str,
}

impl<'a> Triage<'a> {
    fn read(row: &'a tokio_postgres::Row) -> Result<Self, tokio_postgres::Error> {
        let state: &str = row.try_get(10)?;
        let expires_at: Option<Time> = row.try_get(13)?;
        let expired = expires_at
            .as_ref()
            .filter(|e| state != "untriaged" && e.0 <= chrono::Utc::now());
        if let Some(expiry) = expired {
            return Ok(Triage {
                state: "untriaged",
                reason: None,
                comment: None,
                expires_at: None,
                updated_at: Some(Time(expiry.0)),
                updated_by: None,
            });
        }
        let updated_by = match row.try_get::<_, Option<Id>>(15)? {
            None => None,
            // A key's name is written with its id; posture reads a missing one as "".
            Some(key_id) => Some(Actor {
                key_id,
                name: row.try_get::<_, Option<&str>>(16)?.unwrap_or(""),
            }),
        };
        Ok(Triage {
            state,
            reason: row.try_get(11)?,
            comment: row.try_get(12)?,
            expires_at,
            updated_at: row.try_get(14)?,
            updated_by,
        })
    }
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Identity<'a> {
    id: &'a str,
    display_name: &'a str,
    kind: &'a str,
    cloud_tenant_id: Id,
}

impl<'a> Finding<'a> {
    fn read(row: &'a tokio_postgres::Row) -> Result<Self, tokio_postgres::Error> {
        let identity = match row.try_get::<_, Option<&str>>(17)? {
            None => None,
            Some(id) => Some(Identity {
                id,
                display_name: row.try_get(18)?,
                kind: row.try_get(19)?,
                cloud_tenant_id: row.try_get(20)?,
            }),
        };
        Ok(Finding {
            id: row.try_get(0)?,
            cloud_tenant_id: row.try_get(1)?,
            finding_type: row.try_get(2)?,
            severity: row.try_get(3)?,
            status: row.try_get(4)?,
            title: row.try_get(5)?,
            description: row.try_get(6)?,
            identity,
            detected_at: row.try_get(7)?,
            updated_at: row.try_get(8)?,
            modified_at: row.try_get(9)?,
            triage: Triage::read(row)?,
        })
    }
}
