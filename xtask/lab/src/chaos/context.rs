//! What the scenarios share: the receiver, subscribing to it, the event types.

use anyhow::Context as _;
use serde_json::json;

use super::{block_on, cluster::Customer, receiver::Receiver};

/// What scenarios share: the receiver and the way to subscribe to it.
pub struct Context {
    pub receiver: Receiver,
    pub(super) hook_base: String,
    pub(super) api: String,
}

/// Every event type.
pub const EVERY_EVENT: &[&str] = &[
    "finding_critical",
    "finding_high",
    "finding_medium",
    "finding_low",
];

impl Context {
    /// Subscribes `customer` to the receiver's endpoint `name`; returns the subscription id.
    pub fn subscribe(
        &self,
        customer: &Customer,
        name: &str,
        events: &[&str],
    ) -> anyhow::Result<String> {
        let url = format!("{}/hook/{name}", self.hook_base);
        self.subscribe_at(customer, name, &url, events)
    }

    /// Subscribes `customer` to `url`, whose deliveries endpoint `name` checks.
    pub fn subscribe_at(
        &self,
        customer: &Customer,
        name: &str,
        url: &str,
        events: &[&str],
    ) -> anyhow::Result<String> {
        self.subscribe_through(&self.api, customer, name, url, events)
    }

    /// As [`Context::subscribe`], through the API at `api` (another deployment's).
    pub fn subscribe_on(
        &self,
        api: &str,
        customer: &Customer,
        name: &str,
        events: &[&str],
    ) -> anyhow::Result<String> {
        let url = format!("{}/hook/{name}", self.hook_base);
        self.subscribe_through(api, customer, name, &url, events)
    }

    fn subscribe_through(
        &self,
        api: &str,
        customer: &Customer,
        name: &str,
        url: &str,
        events: &[&str],
    ) -> anyhow::Result<String> {
        let body = json!({"name": name, "webhookUrl": url, "webhookType": "generic", "eventTypes": events});
        let created = block_on(async {
            let response = reqwest::Client::new()
                .post(format!("{api}/api/v1/webhooks"))
                .bearer_auth(&customer.key)
                .json(&body)
                .send()
                .await?;
            anyhow::ensure!(
                response.status().is_success(),
                "subscribing: {}",
                response.status()
            );
            Ok(response.json::<serde_json::Value>().await?)
        })??;
        let secret = created["data"]["signingSecret"]
            .as_str()
            .context("signingSecret")?;
        self.receiver.set_secret(name, secret.to_owned());
        Ok(created["data"]["id"]
            .as_str()
            .context("subscription id")?
            .to_owned())
    }
}
