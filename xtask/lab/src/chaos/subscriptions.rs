//! Webhook subscription writes under a fault: a customer's key creates a subscription and
//! deletes it, over and over, on the instances in turn. Each `201` or `204` is an
//! acknowledged write that must be in the database afterwards (the subscription there, or
//! gone once its deletion was).

use std::{collections::BTreeSet, time::Duration};

use serde_json::json;

use super::{
    cluster::{Cluster, Customer},
    writers::{self, Writer, Writing, server_error},
};

/// The subscriptions whose creation, and those whose deletion, was acknowledged.
pub(super) struct Subscriptions {
    key: String,
    kept: BTreeSet<String>,
    deleted: BTreeSet<String>,
    acknowledged: usize,
    /// Answers in 500..=599 but 503: never an answer to a fault of the database.
    server_errors: usize,
}

/// Starts creating and deleting subscriptions with `writer`'s key, on the instances at
/// `bases` in turn.
pub(super) fn start_writing(bases: &[String], writer: &Customer) -> Writing<Subscriptions> {
    let subscriptions = Subscriptions {
        key: writer.key.clone(),
        kept: BTreeSet::new(),
        deleted: BTreeSet::new(),
        acknowledged: 0,
        server_errors: 0,
    };
    writers::start(bases.to_vec(), subscriptions)
}

impl Writer for Subscriptions {
    /// As fast as they are answered.
    const PAUSE: Duration = Duration::ZERO;

    /// A subscription created, then deleted.
    async fn write(&mut self, http: &reqwest::Client, base: &str, turn: usize) {
        let created = http
            .post(format!("{base}/api/v1/webhooks"))
            .bearer_auth(&self.key)
            .json(
                &json!({"name": format!("w{turn}"), "webhookUrl": "https://hooks.example.com/x",
                          "webhookType": "generic", "eventTypes": ["finding_high"]}),
            )
            .send()
            .await;
        let Ok(created) = created else { return };
        self.server_errors += usize::from(server_error(created.status().as_u16()));
        if created.status() != 201 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            return;
        }
        let Ok(body) = created.json::<serde_json::Value>().await else {
            return;
        };
        let Some(id) = body["data"]["id"].as_str().map(str::to_owned) else {
            return;
        };
        self.kept.insert(id.clone());
        self.acknowledged += 1;
        let deleted = http
            .delete(format!("{base}/api/v1/webhooks/{id}"))
            .bearer_auth(&self.key)
            .send()
            .await;
        // Not acknowledged, it may or may not have happened: neither kept nor deleted.
        self.kept.remove(&id);
        match deleted.map(|r| r.status().as_u16()) {
            Ok(204) => {
                self.deleted.insert(id);
                self.acknowledged += 1;
            }
            answer => self.server_errors += usize::from(answer.is_ok_and(server_error)),
        }
    }
}

impl Subscriptions {
    /// The answers that were server errors other than `503`.
    pub(super) fn server_errors(&self) -> usize {
        self.server_errors
    }

    /// The writes acknowledged but not in the database now: (lost, acknowledged).
    pub(super) fn lost(
        &self,
        cluster: &Cluster,
        writer: &Customer,
    ) -> anyhow::Result<(usize, usize)> {
        let present: BTreeSet<String> = cluster
            .psql(&format!(
                "SELECT coalesce(string_agg(id::text, ','), '') FROM webhook_subscriptions \
                 WHERE customer_id = '{}' AND active",
                writer.id
            ))?
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let lost =
            self.kept.difference(&present).count() + self.deleted.intersection(&present).count();
        Ok((lost, self.acknowledged))
    }
}
