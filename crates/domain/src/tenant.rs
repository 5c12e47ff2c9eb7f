//! Connected cloud directory tenants.

use chrono::{DateTime, Utc};

use crate::ids::CloudTenantId;

/// A cloud directory tenant connected to a customer. A tenant belongs to one customer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenant {
    pub cloud_tenant_id: CloudTenantId,
    pub display_name: String,
    pub primary_domain: Option<String>,
    pub connected_at: DateTime<Utc>,
}

/// A tenant to connect (by `tenants add` or a `tenant` ingest record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewTenant {
    pub cloud_tenant_id: CloudTenantId,
    pub display_name: String,
    pub primary_domain: Option<String>,
}
