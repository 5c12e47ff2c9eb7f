//! What `cargo xtask bench` is asked to measure, and at which sizes.

use std::borrow::Cow;

use clap::Args;

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    /// Customers to load.
    #[arg(long, default_value_t = 200)]
    pub(super) customers: usize,
    /// Findings over all customers.
    #[arg(long, default_value_t = 1_000_000)]
    pub(super) findings: usize,
    /// Findings of the largest customer.
    #[arg(long, default_value_t = 200_000)]
    pub(super) largest: usize,
    /// Seconds of each measured run (a read route and each of its SQL baselines run twice).
    #[arg(long, default_value_t = 6)]
    pub(super) seconds: u64,
    /// Concurrent connections of the HTTP and SQL load (comma-separated: one run each).
    #[arg(long, value_delimiter = ',', default_value = "16,64")]
    pub(super) connections: Vec<u32>,
    /// `POSTURE_DB_POOL_SIZE` of the measured posture-api and posture-worker (their default
    /// when not given).
    #[arg(long)]
    pub(super) pool_size: Option<u32>,
    /// Measure the scale curve instead (`scale.rs`): every figure at two sizes of the same
    /// shape, and its ratio.
    #[arg(long)]
    pub(super) scale: bool,
    /// Measure only what response compression costs and saves (`compression.rs`), on the
    /// same data.
    #[arg(long)]
    pub(super) compression_only: bool,
    /// Measure only how rate-limit resets spread (`limiter.rs`: 1,000 throttled keys on a
    /// simulated clock, aligned windows against posture's), in a second, without data.
    #[arg(long)]
    pub(super) resets_only: bool,
    /// Measure only the customers' CLI (`cli.rs`: `posture sync` of the largest customer into
    /// SQLite, first and after a pass changing 1%), on the same data.
    #[arg(long)]
    pub(super) cli_only: bool,
    /// Measure only OAuth and the credentials' cost (`oauth.rs`: the token endpoint with a
    /// secret and with `private_key_jwt`, and a small list read with an access token against
    /// a key; `record_use.rs`: the same read recording the key's use against a server with
    /// `POSTURE_RECORD_USE=off`), on the same data.
    #[arg(long)]
    pub(super) oauth_only: bool,
    /// Measure only the read routes with their CPU per request (`http.rs`), on the same
    /// data: the overhead figures of docs/performance.md, at each `--connections`, and the
    /// same reads through PostgREST when it is installed.
    #[arg(long)]
    pub(super) reads_only: bool,
    /// Measure only the read replica (`scale_out.rs`: one instance on the primary, one
    /// reading a streaming replica), on the same data.
    #[arg(long)]
    pub(super) replicas_only: bool,
    /// Measure only the webhooks (`deliveries.rs`: a pass's fan-out, one and two workers;
    /// `delivery_log.rs`: one subscription with 100,000 deliveries, its pages and filters);
    /// run it with small data
    /// (`--customers 2 --findings 2000 --largest 1000`), which it does not read.
    #[arg(long)]
    pub(super) delivery_log_only: bool,
    /// Measure posture on Citus against one node (`citus.rs`: the small customer's list,
    /// the detail, a pass of 200,000 findings and its fan-out; the time to distribute the
    /// single-node data in place; the spread over the nodes), on the same data.
    #[arg(long)]
    pub citus: bool,
    /// Measure only the events feed (`events.rs`: consumers waiting for a commit, the feed
    /// read at depth in 1M and 10M events), on a database of its own.
    #[arg(long)]
    pub(super) events_only: bool,
    /// The two sizes of the events feed read at depth, in events, smaller first.
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    pub(super) event_sizes: Vec<i64>,
    /// Consumers waiting at once on the events feed (spread over customers, 32 each).
    #[arg(long, default_value_t = 1000)]
    pub(super) events_waiters: usize,
    /// Every scenario of the default run at a small size, on the debug build: whether the
    /// benchmark runs to its end (CI runs it); its figures measure nothing. Sets the data to
    /// 2 customers and 2,000 findings, 1 s runs at 4 connections, 64 waiting consumers and
    /// event depths of 2,000 and 4,000; the webhooks' and the delivery log's sizes shrink
    /// likewise.
    #[arg(long)]
    pub(super) smoke: bool,
    /// The two sizes of `--scale`, in findings, smaller first.
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    pub(super) scale_sizes: Vec<usize>,
}

impl BenchArgs {
    /// `--smoke`: the arguments at their small sizes.
    pub(super) fn at_smoke_size(&self) -> Cow<'_, BenchArgs> {
        if !self.smoke {
            return Cow::Borrowed(self);
        }
        Cow::Owned(BenchArgs {
            customers: 2,
            findings: 2_000,
            largest: 1_000,
            seconds: 1,
            connections: vec![4],
            event_sizes: vec![2_000, 4_000],
            events_waiters: 64,
            ..self.clone()
        })
    }
}
