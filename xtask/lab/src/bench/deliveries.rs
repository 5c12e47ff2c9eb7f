//! Webhook delivery: the fan-out of a large pass, one worker's throughput, then two
//! workers' on the same queue.

use std::{
    path::Path,
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use actix_web::{HttpResponse, web};
use anyhow::Context as _;
use serde_json::{Value, json};

use super::Figure;
use crate::{demo_data::write_new_findings_pass, files::scratch_dir, process::output};

pub(super) const SUBSCRIPTIONS: usize = 25;

/// A receiver that answers 204 and counts.
pub(super) fn counting_receiver(count: Arc<AtomicU64>) -> anyhow::Result<String> {
    let (listener, url) = crate::receivers::loopback("/hook")?;
    let count = web::Data::new(count);
    crate::receivers::serve(listener, 1, move |routes| {
        routes.app_data(count.clone()).route(
            "/hook",
            web::post().to(
                |_body: web::Bytes, count: web::Data<Arc<AtomicU64>>| async move {
                    count.fetch_add(1, Ordering::Relaxed);
                    HttpResponse::NoContent().finish()
                },
            ),
        );
    })?;
    Ok(url)
}

fn api(bin: &Path, url: &str, args: &[&str]) -> anyhow::Result<Value> {
    let text = output(
        Command::new(bin)
            .args(args)
            .arg("--json")
            .env("DATABASE_URL", url)
            .env("POSTURE_LOG", "warn"),
    )?;
    serde_json::from_str(text.trim()).with_context(|| format!("output of {args:?}"))
}

pub(super) fn subscribe(base: &str, key: &str, hook: &str) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = reqwest::Client::new();
        for i in 0..SUBSCRIPTIONS {
            let response = client
                .post(format!("{base}/api/v1/webhooks"))
                .bearer_auth(key)
                .json(&json!({"name": format!("bench {i}"), "webhookUrl": hook, "webhookType": "generic",
                              "eventTypes": ["finding_critical", "finding_high", "finding_medium", "finding_low"]}))
                .send()
                .await?;
            anyhow::ensure!(response.status().is_success(), "creating a subscription: {}", response.status());
        }
        Ok(())
    })
}

/// A new customer for the fan-out and its `manage:webhooks` key: (id, key).
pub(super) fn fan_out_customer(bin: &Path, database_url: &str) -> anyhow::Result<(String, String)> {
    let customer = api(
        bin,
        database_url,
        &["customers", "create", "--name", "Fan-out"],
    )?;
    let id = customer["id"].as_str().context("customer id")?.to_owned();
    let issued = api(
        bin,
        database_url,
        &[
            "keys",
            "issue",
            "--customer",
            &id,
            "--scope",
            "manage:webhooks",
        ],
    )?;
    let key = issued["key"].as_str().context("key")?.to_owned();
    Ok((id, key))
}

/// Fan-out of a pass with 100,000 new findings to 25 subscriptions, then one worker's
/// deliveries per second to a local receiver. Returns the customer's `manage:webhooks` key.
pub fn run(
    bin_dir: &Path,
    database_url: &str,
    base: &str,
    seconds: u64,
    pool_size: Option<u32>,
    sizes: super::sizes::Sizes,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<String> {
    let new_findings = sizes.new_findings;
    let api_bin = bin_dir.join("posture-api");
    let (id, key) = fan_out_customer(&api_bin, database_url)?;
    let delivered = Arc::new(AtomicU64::new(0));
    let hook = counting_receiver(delivered.clone())?;
    subscribe(base, &key, &hook)?;

    let file = scratch_dir("bench-fanout")?.join("fan-out-pass.jsonl");
    write_new_findings_pass(
        &file,
        "0b7c0f39-2d3e-4c1a-9f57-6a1d2b3c4d5e",
        "n",
        new_findings,
    )?;
    let pass = api(
        &api_bin,
        database_url,
        &["ingest", "--customer", &id, file.to_str().context("path")?],
    )?;
    let queued = pass["deliveriesQueued"].as_u64().unwrap_or(0);
    let fan_out_ms = pass["fanOutMs"].as_f64().unwrap_or(f64::NAN);
    figures.push(Figure::measure(
        format!("fan-out of a pass with {new_findings} new findings to {SUBSCRIPTIONS} subscriptions ({queued} deliveries)"),
        fan_out_ms,
        "ms",
        true,
    ));

    let start_worker = || {
        let mut worker = Command::new(bin_dir.join("posture-worker"));
        if let Some(size) = pool_size {
            worker.env("POSTURE_DB_POOL_SIZE", size.to_string());
        }
        worker
            .env("DATABASE_URL", database_url)
            .env("POSTURE_SECRET_KEY", super::http::SECRET_KEY)
            .env("POSTURE_WEBHOOK_ALLOW_PRIVATE", "true")
            .env("POSTURE_WORKER_CONCURRENCY", "16")
            .env("POSTURE_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .context("starting posture-worker")
    };
    // Deliveries per second over `seconds`, counted from now.
    let window = || {
        let before = delivered.load(Ordering::Relaxed);
        let started = Instant::now();
        std::thread::sleep(Duration::from_secs(if sizes.smoke {
            seconds
        } else {
            seconds.max(10)
        }));
        (delivered.load(Ordering::Relaxed) - before) as f64 / started.elapsed().as_secs_f64()
    };
    let first = start_worker()?;
    let one = window();
    // A second worker on the same queue (FOR UPDATE SKIP LOCKED shares it out).
    let second = start_worker()?;
    let two = window();
    let total = delivered.load(Ordering::Relaxed);
    for worker in [first, second] {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(worker.id().to_string())
            .status();
        let _ = worker.wait_with_output();
    }
    anyhow::ensure!(
        total < queued || sizes.smoke,
        "the queue ran dry during the measurement ({total} of {queued} delivered): the figures \
         would understate the workers"
    );
    figures.push(Figure::measure(
        "one posture-worker (16 concurrent) to a local receiver, 100 findings per delivery",
        one,
        "deliveries/s",
        false,
    ));
    figures.push(
        Figure::measure(
            "two posture-workers (16 concurrent each) on the same queue, together",
            two,
            "deliveries/s",
            false,
        )
        .against(one, "one worker", None),
    );
    Ok(key)
}
