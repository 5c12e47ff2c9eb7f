//! Connected tenants.

use chrono::{DateTime, Utc};
use posture_domain::{CloudTenantId, tenant::Tenant};
use schemars::JsonSchema;
use serde::Serialize;

/// A cloud directory tenant connected to the customer.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantResponse {
    #[schemars(schema_with = "crate::tenant_id")]
    pub cloud_tenant_id: CloudTenantId,
    pub display_name: String,
    /// The tenant's initial domain (e.g. `contoso.onmicrosoft.com`), when known.
    pub primary_domain: Option<String>,
    /// When the tenant was connected to the customer.
    #[serde(serialize_with = "crate::time::serialize")]
    pub connected_at: DateTime<Utc>,
}

impl From<Tenant> for TenantResponse {
    fn from(t: Tenant) -> Self {
        Self {
            cloud_tenant_id: t.cloud_tenant_id,
            display_name: t.display_name,
            primary_domain: t.primary_domain,
            connected_at: t.connected_at,
        }
    }
}
