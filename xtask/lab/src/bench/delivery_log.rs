//! The delivery log at depth: one subscription with 100,000 deliveries, its first page, a
//! page 50,000 deep by cursor, and filters that match nothing (the worst case for a filter
//! its index does not lead with: the whole log is read for the page and its total).

use std::time::Duration;

use anyhow::Context as _;
use serde_json::Value;

use super::{
    Figure,
    http::{Server, record, wrk},
};
use crate::process::psql_value;

fn get(base: &str, key: &str, path: &str) -> anyhow::Result<Value> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let response = reqwest::Client::new()
            .get(format!("{base}{path}"))
            .bearer_auth(key)
            .send()
            .await?;
        anyhow::ensure!(
            response.status().is_success(),
            "GET {path}: {}",
            response.status()
        );
        Ok(response.json().await?)
    })
}

/// Fills one subscription of `customer` with 100,000 finished deliveries (one a second,
/// newest now) and measures its log.
pub fn run(
    server: &Server,
    database_url: &str,
    key: &str,
    connections: u32,
    duration: Duration,
    sizes: super::sizes::Sizes,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let deliveries = sizes.deliveries;
    let subscriptions = get(&server.base, key, "/api/v1/webhooks?limit=1")?;
    let webhook = subscriptions["data"][0]["id"]
        .as_str()
        .context("a subscription")?
        .to_owned();
    // Its log is the 100,000 below alone (a fan-out measured before may have queued some),
    // so that the filters below match nothing, as they say.
    psql_value(
        database_url,
        &format!(
            "DELETE FROM webhook_attempts a USING webhook_deliveries d \
             WHERE a.customer_id = d.customer_id AND a.delivery_id = d.id \
               AND d.subscription_id = '{webhook}'; \
             DELETE FROM webhook_deliveries WHERE subscription_id = '{webhook}'; SELECT 1"
        ),
    )?;
    let inserting = std::time::Instant::now();
    psql_value(
        database_url,
        &format!(
            "WITH s AS (SELECT customer_id, id FROM webhook_subscriptions WHERE id = '{webhook}') \
             INSERT INTO webhook_deliveries (customer_id, id, subscription_id, pass_id, \
                 event_type, chunk, finding_ids, status, attempts, next_attempt_at, created_at, \
                 delivered_at, last_attempt_at, last_status_code) \
             SELECT s.customer_id, gen_random_uuid(), s.id, gen_random_uuid(), 'finding_high', \
                    0, ARRAY['f-1'], 'delivered', 1, t, t, t, t, 204 \
             FROM s, generate_series(1, {deliveries}) AS g, \
                  LATERAL (SELECT now() - g * interval '1 second' AS t) AS at; \
             SELECT 1"
        ),
    )?;
    // The write side of the log's indexes: the batch is one statement, as a fan-out is.
    figures.push(Figure::measure(
        format!("inserting {deliveries} deliveries of one subscription in one statement"),
        inserting.elapsed().as_secs_f64() * 1000.0,
        "ms",
        true,
    ));
    // What autovacuum does after such a batch: the visibility map lets the page and its
    // total be read from the index alone.
    psql_value(database_url, "VACUUM ANALYZE webhook_deliveries")?;
    let log = format!("/api/v1/webhooks/{webhook}/deliveries");
    // A cursor half-way (50,000 rows deep): follow as many pages of 500.
    let mut cursor = String::new();
    for _ in 0..(deliveries / 2 / 500).max(1) {
        let page = get(
            &server.base,
            key,
            &format!(
                "{log}?limit=500{}",
                if cursor.is_empty() {
                    String::new()
                } else {
                    format!("&after={cursor}")
                }
            ),
        )?;
        cursor = page["meta"]["nextCursor"]
            .as_str()
            .context("a next page")?
            .to_owned();
    }
    for (label, query) in [
        ("first page of 100".to_owned(), "limit=100".to_owned()),
        (
            format!(
                "page of 100 after a cursor {} deep",
                thousands(deliveries / 2)
            ),
            format!("limit=100&after={cursor}"),
        ),
        (
            "status=failed (matches nothing)".to_owned(),
            "limit=100&status=failed".to_owned(),
        ),
        (
            "eventType=finding_low (matches nothing)".to_owned(),
            "limit=100&eventType=finding_low".to_owned(),
        ),
    ] {
        let load = wrk(
            &format!("{}{log}?{query}", server.base),
            key,
            connections,
            duration,
        )?;
        record(
            figures,
            &format!(
                "GET /webhooks/{{id}}/deliveries, {deliveries} deliveries, {label}, {connections} conn"
            ),
            &load,
            None,
        );
    }
    Ok(())
}

/// `n` with a comma between each group of three digits (50,000), as the figures are named.
fn thousands(n: u32) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
