//! `posture-api deliveries list|retry`: what the outbox holds, and a second chance.

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use posture_domain::{
    DeliveryId,
    delivery::{Delivery, DeliveryStatus},
    ports::DeliveryRepository,
};
use serde_json::{Value, json};

use super::{customer_scope, fail, store};
use crate::{cli::DeliveriesCommand, output::emit};

fn to_json(d: &Delivery) -> Value {
    json!({
        "id": d.id.to_string(),
        "subscriptionId": d.subscription_id.to_string(),
        "analyzerPassId": d.pass_id.to_string(),
        "eventType": d.event_type.as_str(),
        "chunk": d.chunk,
        "findings": d.finding_ids.len(),
        "status": d.status.as_str(),
        "attempts": d.attempts,
        "nextAttemptAt": d.next_attempt_at,
        "createdAt": d.created_at,
        "deliveredAt": d.delivered_at,
        "lastError": d.last_error,
    })
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
            limit,
        } => {
            let scope = customer_scope(&customer)?;
            let status = status
                .map(|s| s.parse::<DeliveryStatus>().context("--status"))
                .transpose()?;
            let deliveries = store(&database)?
                .list_deliveries(scope, status, limit)
                .await
                .map_err(|e| fail("listing deliveries", e))?;
            let data: Vec<Value> = deliveries.iter().map(to_json).collect();
            emit(json, &json!({ "data": data }), || {
                let mut lines = vec![format!(
                    "{:<36}  {:<16}  {:<9}  {:>8}  {:<20}  LAST ERROR",
                    "ID", "EVENT", "STATUS", "ATTEMPTS", "NEXT ATTEMPT"
                )];
                lines.extend(deliveries.iter().map(|d| {
                    format!(
                        "{:<36}  {:<16}  {:<9}  {:>8}  {:<20}  {}",
                        d.id,
                        d.event_type,
                        d.status,
                        d.attempts,
                        time(d.next_attempt_at),
                        d.last_error.as_deref().unwrap_or("-")
                    )
                }));
                lines.join("\n")
            })
        }
        DeliveriesCommand::Retry {
            database,
            delivery_id,
        } => {
            let id: DeliveryId = delivery_id
                .parse()
                .map_err(|_| anyhow::anyhow!("{delivery_id:?} is not a delivery id (a UUID)"))?;
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
