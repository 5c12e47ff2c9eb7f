//! Triage writes under a fault: a customer's key marks its findings in turn
//! (`PATCH /findings/{id}`), each answered 200 an acknowledged write whose mark must be in
//! the database afterwards.

use serde_json::json;

use super::{
    cluster::{Cluster, Customer},
    writers::{self, Record, Writer, Writing, Written},
};

/// The findings' marks as last acknowledged.
pub struct Triages {
    key: String,
    ids: Vec<String>,
    record: Record<String>,
}

/// Starts marking 20 of `customer`'s findings in turn on the instances in turn,
/// `acknowledged` and `untriaged` by rounds.
pub fn start(cluster: &Cluster, customer: &Customer) -> anyhow::Result<Writing<Triages>> {
    let ids: Vec<String> = cluster
        .psql(&format!(
            "SELECT string_agg(id, ',') FROM (SELECT id FROM findings \
             WHERE customer_id = '{}' ORDER BY id LIMIT 20) f",
            customer.id
        ))?
        .split(',')
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .collect();
    anyhow::ensure!(!ids.is_empty(), "the customer has no findings to triage");
    let triages = Triages {
        key: customer.key.clone(),
        ids,
        record: Record::default(),
    };
    Ok(writers::start(cluster.bases(), triages))
}

impl Writer for Triages {
    async fn write(&mut self, http: &reqwest::Client, base: &str, turn: usize) {
        let id = &self.ids[turn % self.ids.len()];
        let state = if (turn / self.ids.len()).is_multiple_of(2) {
            "acknowledged"
        } else {
            "untriaged"
        };
        let answer = http
            .patch(format!("{base}/api/v1/findings/{id}"))
            .bearer_auth(&self.key)
            .json(&json!({"triage": {"state": state}}))
            .send()
            .await
            .map(|r| r.status().as_u16())
            .ok();
        if answer == Some(200) {
            self.record.acknowledged(id.clone(), state.to_owned());
        } else {
            self.record.not_acknowledged(Some(id), answer);
        }
    }
}

impl Triages {
    /// The record against the database.
    pub fn lost(&self, cluster: &Cluster, customer: &Customer) -> anyhow::Result<Written> {
        self.record.checked(|id| {
            cluster.psql(&format!(
                "SELECT triage_state FROM findings WHERE customer_id = '{}' AND id = '{id}'",
                customer.id
            ))
        })
    }
}
