//! Ingest lines and passes for tests: small builders over the operator's JSON Lines format.

use posture_domain::{
    CustomerScope,
    ingest::{IngestError, PassSummary, numbered_items},
    ports::{CustomerRepository, IngestRepository},
};
use posture_store_postgres::PgStore;
use serde_json::{Value, json};

/// A `tenant` record.
pub fn tenant(id: &str, name: &str) -> Value {
    json!({"type": "tenant", "cloudTenantId": id, "displayName": name,
           "primaryDomain": format!("{}.onmicrosoft.com", name.to_lowercase())})
}

/// An `identity` record of kind `user` with one active Global Reader assignment.
pub fn identity(id: &str, tenant: &str, name: &str) -> Value {
    json!({"type": "identity", "id": id, "cloudTenantId": tenant, "kind": "user",
    "displayName": name, "principalName": format!("{id}@example.com"),
    "roleAssignments": [
        {"roleName": "Global Reader", "scope": "/", "assignmentType": "active"}
    ]})
}

/// A `finding` record about `identity`.
pub fn finding(id: &str, tenant: &str, severity: &str, status: &str, identity: &str) -> Value {
    json!({"type": "finding", "id": id, "cloudTenantId": tenant,
           "findingType": "standing_privileged_access", "severity": severity,
           "status": status, "title": format!("Finding {id}"), "identityId": identity})
}

/// A `roleRecommendation` record for `identity`.
pub fn recommendation(id: &str, tenant: &str, identity: &str) -> Value {
    json!({"type": "roleRecommendation", "id": id, "cloudTenantId": tenant,
           "identityId": identity, "currentRoles": ["Owner", "Reader"],
           "recommendedRole": {"name": "Reader", "actions": ["*/read"]},
           "removedActions": ["*"]})
}

/// A `uprScore` record for `identity`.
pub fn upr_score(identity: &str, tenant: &str, score: u8, recorded_at: &str) -> Value {
    json!({"type": "uprScore", "identityId": identity, "cloudTenantId": tenant, "score": score,
           "factors": {"privilegeTier": score / 2, "unusedPermission": score - score / 2},
           "recordedAt": recorded_at})
}

/// Records as JSON Lines.
pub fn lines(records: &[Value]) -> String {
    records.iter().map(|r| format!("{r}\n")).collect()
}

/// Runs one analyzer pass over JSON Lines text, as `posture-api ingest` does.
pub async fn ingest(
    store: &PgStore,
    scope: CustomerScope,
    text: &str,
) -> Result<PassSummary, IngestError> {
    let mut items = numbered_items(text.lines().map(|l| Ok::<_, std::io::Error>(l.to_owned())));
    store.run_pass(scope, &mut items).await
}

/// A new customer and its scope (as the operator would create it).
pub async fn customer(store: &PgStore, name: &str) -> CustomerScope {
    let customer = store.create_customer(name).await.expect("create customer");
    CustomerScope::for_operator(customer.id)
}

/// A fresh random cloud tenant id.
pub fn tenant_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
