//! Sending one delivery at once, outside the outbox: test deliveries
//! (`POST /webhooks/{id}/test`). The same client (egress rules, timeout, no redirects), the
//! same renderings and the same signatures as the worker's; one attempt, never retried.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use posture_domain::{
    Error, Result,
    delivery::{Delivery, DeliveryTarget},
    finding::Finding,
    ports::{DirectSender, SentNow},
    secrets::Keyring,
};

use crate::{client::WebhookClient, render::render, secrets::open_secrets};

/// Sends test deliveries from `posture-api`.
pub struct ImmediateSender {
    client: WebhookClient,
    keyring: Arc<Keyring>,
}

impl ImmediateSender {
    pub fn new(
        keyring: Arc<Keyring>,
        timeout: Duration,
        allow_private: bool,
        clock: Arc<dyn posture_domain::clock::Clock>,
    ) -> std::result::Result<Self, reqwest::Error> {
        Ok(Self {
            client: WebhookClient::new(timeout, allow_private, clock)?,
            keyring,
        })
    }
}

#[async_trait]
impl DirectSender for ImmediateSender {
    async fn send_now(
        &self,
        delivery: &Delivery,
        target: &DeliveryTarget,
        findings: Vec<Finding>,
    ) -> Result<SentNow> {
        let secrets = open_secrets(&self.keyring, delivery, target)?;
        let body = render(target.webhook_type, delivery, findings)
            .map_err(|e| Error::internal(format!("rendering a test delivery failed: {e}")))?;
        let id = delivery.id.to_string();
        let headers = secrets.headers(delivery, &id);
        let (outcome, attempt) = self.client.send(&target.url, &body, &headers).await;
        Ok(SentNow {
            body,
            outcome,
            attempt,
        })
    }
}
