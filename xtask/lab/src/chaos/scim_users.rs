//! SCIM provisioning under a fault: an identity provider's key (`provision:scim`) creates
//! users, deactivates and reactivates them and deletes them, in turns; each write answered
//! with success is acknowledged and must be in the database afterwards (the user there with
//! the `active` last acknowledged, or gone once its deletion was).

use serde_json::{Value, json};

use super::{
    cluster::{Cluster, Customer},
    writers::{self, Record, Writer, Writing, Written},
};

const USER: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
const PATCH_OP: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";

/// The users' states as last acknowledged (`None`: deleted), and the writes acknowledged.
pub struct ScimUsers {
    key: String,
    /// Names the users of this run apart from another run's.
    tag: String,
    /// The users created, oldest first.
    created: Vec<String>,
    record: Record<Option<bool>>,
}

/// Starts provisioning `customer`'s users with a `provision:scim` key of its own, on the
/// instances in turn.
pub fn start(
    cluster: &Cluster,
    customer: &Customer,
    tag: &str,
) -> anyhow::Result<Writing<ScimUsers>> {
    let issued = cluster.cli(&[
        "keys",
        "issue",
        "--customer",
        &customer.id,
        "--name",
        "chaos SCIM",
        "--scope",
        "provision:scim",
    ])?;
    let key = issued["key"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("no key in {issued}"))?
        .to_owned();
    let users = ScimUsers {
        key,
        tag: tag.to_owned(),
        created: Vec::new(),
        record: Record::default(),
    };
    Ok(writers::start(cluster.bases(), users))
}

impl Writer for ScimUsers {
    /// In fours: a user created, the newest user deactivated, then reactivated, and the
    /// oldest user still there deleted.
    async fn write(&mut self, http: &reqwest::Client, base: &str, turn: usize) {
        let users = format!("{base}/scim/v2/Users");
        let (target, wanted, request) = match (turn % 4, self.created.last()) {
            (0, _) | (_, None) => {
                let body = json!({
                    "schemas": [USER],
                    "userName": format!("chaos-{}-{turn}@example.com", self.tag),
                    "active": true,
                });
                (None, Some(true), http.post(&users).json(&body))
            }
            (3, Some(_)) => {
                let Some(oldest) = self.oldest_alive() else {
                    return;
                };
                let request = http.delete(format!("{users}/{oldest}"));
                (Some(oldest), None, request)
            }
            (step, Some(newest)) => {
                let active = step == 2;
                let body = json!({
                    "schemas": [PATCH_OP],
                    "Operations": [{"op": "replace", "path": "active", "value": active}],
                });
                let request = http.patch(format!("{users}/{newest}")).json(&body);
                (Some(newest.clone()), Some(active), request)
            }
        };
        let posted = target.is_none();
        let answer = request.bearer_auth(&self.key).send().await;
        let status = answer.as_ref().ok().map(|r| r.status().as_u16());
        let acknowledged = match (target, answer) {
            (None, Ok(r)) if status == Some(201) => r
                .json::<Value>()
                .await
                .ok()
                .and_then(|user| user["id"].as_str().map(str::to_owned)),
            (None, _) => None,
            (Some(id), _) if matches!(status, Some(200 | 204)) => Some(id),
            (Some(id), _) => {
                self.record.not_acknowledged(Some(&id), status);
                return;
            }
        };
        match acknowledged {
            Some(id) => {
                if posted {
                    self.created.push(id.clone());
                }
                self.record.acknowledged(id, wanted);
            }
            None => self.record.not_acknowledged(None, status),
        }
    }
}

impl ScimUsers {
    /// The oldest user created whose deletion has not been acknowledged.
    fn oldest_alive(&self) -> Option<String> {
        self.created
            .iter()
            .find(|id| self.record.get(id) != Some(&None))
            .cloned()
    }

    /// The record against the database: a user there with the `active` last
    /// acknowledged, or gone once its deletion was.
    pub fn lost(&self, cluster: &Cluster, customer: &Customer) -> anyhow::Result<Written> {
        self.record.checked(|id| {
            let stored = cluster.psql(&format!(
                "SELECT coalesce(active, true) FROM scim_users \
                 WHERE customer_id = '{}' AND id = '{id}'",
                customer.id
            ))?;
            Ok(match stored.as_str() {
                "" => None,
                active => Some(active == "t"),
            })
        })
    }
}
