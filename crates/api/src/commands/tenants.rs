//! `posture-api tenants add`.

use posture_domain::{ports::TenantRepository, tenant::NewTenant};
use serde_json::json;

use super::operator::{customer_scope, fail, store};
use crate::{cli::TenantsCommand, output::emit};

pub async fn run(command: TenantsCommand, json: bool) -> anyhow::Result<()> {
    match command {
        TenantsCommand::Add {
            database,
            customer,
            tenant_id,
            name,
            domain,
        } => {
            let scope = customer_scope(&customer)?;
            let cloud_tenant_id = tenant_id
                .parse()
                .map_err(|_| anyhow::anyhow!("--tenant-id: {tenant_id:?} is not a GUID"))?;
            let tenant = store(&database)?
                .connect_tenant(
                    scope,
                    NewTenant {
                        cloud_tenant_id,
                        display_name: name,
                        primary_domain: domain,
                    },
                )
                .await
                .map_err(|e| match e {
                    posture_domain::Error::NotFound => {
                        anyhow::anyhow!("no customer with id {customer}")
                    }
                    other => fail("connecting the tenant", other),
                })?;
            let value = json!({
                "customerId": scope.customer_id().to_string(),
                "cloudTenantId": tenant.cloud_tenant_id.to_string(),
                "displayName": tenant.display_name,
                "primaryDomain": tenant.primary_domain,
                "connectedAt": tenant.connected_at,
            });
            emit(json, &value, || {
                format!(
                    "connected tenant {} ({})",
                    tenant.cloud_tenant_id, tenant.display_name
                )
            })
        }
    }
}
