//! `posture-api deliveries list|show|retry`: what the outbox holds, one delivery's attempts,
//! and a second chance.

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use posture_domain::{
    DeliveryId, WebhookId,
    delivery::{Attempt, Delivery, DeliveryStatus},
    ports::DeliveryRepository,
};
use serde_json::{Value, json};

use super::operator::{customer_scope, fail, store};
use crate::{
    cli::DeliveriesCommand,
    output::{emit, table},
};

fn to_json(d: &Delivery) -> Value {
    json!({
        "id": d.id.to_string(),
        "subscriptionId": d.subscription_id.to_string(),
        "analyzerPassId": d.pass_id.map(|p| p.to_string()),
        "eventType": d.event_type.as_str(),
        "chunk": d.chunk,
        "findings": d.finding_ids.len(),
        "status": d.status.as_str(),
        "trigger": d.trigger.as_str(),
        "attempts": d.attempts,
        "lastAttemptAt": d.last_attempt_at,
        "lastStatusCode": d.last_status_code,
        "nextAttemptAt": d.next_attempt(),
        "createdAt": d.created_at,
        "deliveredAt": d.delivered_at,
        "lastError": d.last_error,
    })
}

fn delivery_id_of(text: &str) -> anyhow::Result<DeliveryId> {
    text.parse()
        .map_err(|_| anyhow::anyhow!("{text:?} is not a delivery id (a UUID)"))
}

fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub async fn run(command: DeliveriesCommand, json: bool) -> anyhow::Result<()> {
    match command {
        DeliveriesCommand::List {
            database,
            customer,
            status,
            subscription,
            limit,
        } => {
            let scope = customer_scope(&customer)?;
            let subscription = subscription
                .map(|s| {
                    s.parse::<WebhookId>().map_err(|_| {
                        anyhow::anyhow!("--subscription {s:?} is not a subscription id (a UUID)")
                    })
                })
                .transpose()?;
            let status = status
                .map(|s| s.parse::<DeliveryStatus>().context("--status"))
                .transpose()?;
            let deliveries = store(&database)?
                .list_deliveries(scope, subscription, status, limit)
                .await
                .map_err(|e| fail("listing deliveries", e))?;
            list(&deliveries, json)
        }
        DeliveriesCommand::Show {
            database,
            customer,
            delivery_id,
        } => {
            let scope = customer_scope(&customer)?;
            let id = delivery_id_of(&delivery_id)?;
            let store = store(&database)?;
            let delivery = store.delivery(scope, id).await.map_err(|e| match e {
                posture_domain::Error::NotFound => {
                    anyhow::anyhow!("customer {customer} has no delivery {delivery_id}")
                }
                other => fail("reading the delivery", other),
            })?;
            let attempts = store
                .attempts(scope, id)
                .await
                .map_err(|e| fail("reading the attempts", e))?;
            show(&delivery, &attempts, json)
        }
        DeliveriesCommand::Retry {
            database,
            delivery_id,
        } => {
            let id = delivery_id_of(&delivery_id)?;
            let delivery = store(&database)?
                .retry_delivery(id)
                .await
                .map_err(|e| match e {
                    posture_domain::Error::NotFound => {
                        anyhow::anyhow!("no delivery with id {delivery_id}")
                    }
                    other => fail("retrying the delivery", other),
                })?;
            emit(json, &to_json(&delivery), || {
                format!("delivery {} is pending again, due now", delivery.id)
            })
        }
    }
}

/// Prints deliveries: JSON `{data}`, or a table.
fn list(deliveries: &[Delivery], json: bool) -> anyhow::Result<()> {
    let data: Vec<Value> = deliveries.iter().map(to_json).collect();
    emit(json, &json!({ "data": data }), || {
        table(
            [
                "ID",
                "EVENT",
                "STATUS",
                "ATTEMPTS",
                "NEXT ATTEMPT",
                "LAST ERROR",
            ],
            &[3],
            deliveries.iter().map(|d| {
                [
                    d.id.to_string(),
                    d.event_type.to_string(),
                    d.status.to_string(),
                    d.attempts.to_string(),
                    d.next_attempt().map_or_else(|| "-".to_owned(), time),
                    d.last_error.clone().unwrap_or_else(|| "-".to_owned()),
                ]
            }),
        )
    })
}

/// Prints a delivery with its attempt log: JSON, or a summary line and a table.
fn show(delivery: &Delivery, attempts: &[Attempt], json: bool) -> anyhow::Result<()> {
    let mut value = to_json(delivery);
    value["attemptLog"] = attempts
        .iter()
        .map(|a| {
            json!({
                "attempt": a.number,
                "at": a.started_at,
                "statusCode": a.status_code,
                "latencyMs": a.latency_ms,
                "error": a.error,
                "detail": a.detail,
                "responseExcerpt": a.response_excerpt,
            })
        })
        .collect();
    emit(json, &value, || {
        let summary = format!(
            "delivery {}  {}  {}  trigger {}  {} attempt(s)",
            delivery.id, delivery.event_type, delivery.status, delivery.trigger, delivery.attempts
        );
        let log = table(
            ["#", "AT", "LATENCY", "STATUS", "ERROR", "DETAIL"],
            &[0, 2],
            attempts.iter().map(|a| {
                [
                    a.number.to_string(),
                    time(a.started_at),
                    format!("{} ms", a.latency_ms),
                    a.status_code
                        .map_or_else(|| "-".to_owned(), |s| s.to_string()),
                    a.error.clone().unwrap_or_else(|| "ok".to_owned()),
                    a.detail.clone().unwrap_or_else(|| "-".to_owned()),
                ]
            }),
        );
        format!("{summary}\n{log}")
    })
}
