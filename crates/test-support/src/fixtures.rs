//! Ingest lines and passes for tests: small builders over the operator's JSON Lines format.

use posture_domain::{
    CustomerScope, WebhookId,
    ingest::{IngestError, PassSummary, numbered_items},
    ports::{CustomerRepository, IngestRepository, WebhookRepository},
    secrets::{Keyring, SigningSecret},
    webhook::{SubscriptionRequest, TargetPolicy, secret_context},
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

/// A new customer with one connected tenant (returned as its id), connected by a pass.
pub async fn customer_with_tenant(store: &PgStore, name: &str) -> (CustomerScope, String) {
    let scope = customer(store, name).await;
    let tenant = tenant_id();
    ingest(store, scope, &lines(&[self::tenant(&tenant, name)]))
        .await
        .expect("connect the tenant");
    (scope, tenant)
}

/// An active `kind` subscription (`generic`, `slack`, `teams`) of the customer to `url` for
/// these event types, its secret sealed with `keyring` as the API does; returns its id and
/// signing secret. Private and `http://` receivers are allowed (tests receive on loopback).
pub async fn subscription(
    store: &PgStore,
    keyring: &Keyring,
    scope: CustomerScope,
    url: &str,
    kind: &str,
    event_types: &[&str],
) -> (WebhookId, String) {
    let new = SubscriptionRequest {
        name: "test".into(),
        webhook_url: url.into(),
        webhook_type: kind.into(),
        event_types: event_types.iter().map(|e| (*e).to_owned()).collect(),
    }
    .validate(TargetPolicy {
        allow_private: true,
    })
    .expect("a valid subscription");
    let id = WebhookId::generate();
    let secret = SigningSecret::generate().expect("a signing secret");
    let sealed = keyring
        .seal(&secret, &secret_context(scope.customer_id(), id))
        .expect("seal the secret");
    store
        .create_subscription(scope, id, &new, &sealed, 25)
        .await
        .expect("create the subscription");
    (id, secret.expose().to_owned())
}
