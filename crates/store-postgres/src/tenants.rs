//! Connected cloud tenants.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::{
    prelude::*,
    sql_types::{Nullable, Text},
};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    CloudTenantId, CustomerScope, Error, Page, PageRequest, Result,
    page::SortKey,
    ports::TenantRepository,
    tenant::{NewTenant, Tenant},
};
use uuid::Uuid;

use crate::{
    PgStore,
    error::{db_error, is_foreign_key_violation},
    schema::{cloud_tenant_owners, tenants},
    sync::{after_key, read_text_key, text_key},
};

#[derive(Queryable, Selectable, QueryableByName)]
#[diesel(table_name = tenants, check_for_backend(diesel::pg::Pg))]
pub(crate) struct TenantRow {
    cloud_tenant_id: Uuid,
    display_name: String,
    primary_domain: Option<String>,
    connected_at: DateTime<Utc>,
}

impl From<TenantRow> for Tenant {
    fn from(row: TenantRow) -> Self {
        Tenant {
            cloud_tenant_id: CloudTenantId::from_uuid(row.cloud_tenant_id),
            display_name: row.display_name,
            primary_domain: row.primary_domain,
            connected_at: row.connected_at,
        }
    }
}

/// Connects a tenant to the customer, or refreshes its names if it is connected already.
/// `Ok(None)` when the tenant is connected to another customer (nothing is written).
///
/// A cloud tenant belongs to the first customer that connects it: `cloud_tenant_owners`
/// says whose it is (on Citus distributed by the cloud tenant, since the rule spans
/// customers); it is read and written only when the customer connects the tenant for the
/// first time. Call it in a transaction.
pub(crate) async fn upsert_tenant(
    conn: &mut AsyncPgConnection,
    scope: CustomerScope,
    tenant: &NewTenant,
) -> QueryResult<Option<Tenant>> {
    let customer = scope.customer_id().as_uuid();
    let id = tenant.cloud_tenant_id.as_uuid();
    // A tenant the customer has connected already is the customer's: then only its own rows
    // are read (on Citus its own node, wherever the tenant's owner row lives).
    let connected: Option<Uuid> = tenants::table
        .find((customer, id))
        .select(tenants::cloud_tenant_id)
        .first(conn)
        .await
        .optional()?;
    if connected.is_none() && !registered_to(conn, customer, id).await? {
        return Ok(None);
    }
    let row = diesel::sql_query(
        "INSERT INTO tenants (customer_id, cloud_tenant_id, display_name, primary_domain) \
         VALUES ($1, $2, $3, $4) \
         ON CONFLICT (customer_id, cloud_tenant_id) DO UPDATE \
            SET display_name = EXCLUDED.display_name, primary_domain = EXCLUDED.primary_domain \
         RETURNING cloud_tenant_id, display_name, primary_domain, connected_at",
    )
    .bind::<diesel::sql_types::Uuid, _>(customer)
    .bind::<diesel::sql_types::Uuid, _>(id)
    .bind::<Text, _>(&tenant.display_name)
    .bind::<Nullable<Text>, _>(&tenant.primary_domain)
    .get_result::<TenantRow>(conn)
    .await?;
    crate::data_versions::notify_data_changed(conn, &[customer]).await?;
    Ok(Some(Tenant::from(row)))
}

/// Registers the cloud tenant `id` to `customer` unless another customer has it; whether it
/// is the customer's. A customer connecting the same tenant at the same time waits for this
/// one's transaction, then finds it taken; a missing customer fails the foreign key.
async fn registered_to(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    id: Uuid,
) -> QueryResult<bool> {
    let owner = || {
        cloud_tenant_owners::table
            .find(id)
            .select(cloud_tenant_owners::customer_id)
    };
    let owner = match owner().first::<Uuid>(conn).await.optional()? {
        Some(owner) => owner,
        None => {
            diesel::insert_into(cloud_tenant_owners::table)
                .values((
                    cloud_tenant_owners::cloud_tenant_id.eq(id),
                    cloud_tenant_owners::customer_id.eq(customer),
                ))
                .on_conflict_do_nothing()
                .execute(conn)
                .await?;
            owner().first::<Uuid>(conn).await?
        }
    };
    Ok(owner == customer)
}

/// The ids of the customer's connected tenants.
pub(crate) async fn tenant_ids(
    conn: &mut AsyncPgConnection,
    scope: CustomerScope,
) -> QueryResult<Vec<CloudTenantId>> {
    let ids: Vec<Uuid> = tenants::table
        .filter(tenants::customer_id.eq(scope.customer_id().as_uuid()))
        .select(tenants::cloud_tenant_id)
        .load(conn)
        .await?;
    Ok(ids.into_iter().map(CloudTenantId::from_uuid).collect())
}

#[async_trait]
impl TenantRepository for PgStore {
    async fn connect_tenant(&self, scope: CustomerScope, tenant: NewTenant) -> Result<Tenant> {
        let mut conn = self.conn().await?;
        let connected = conn
            .transaction(async |conn| upsert_tenant(conn, scope, &tenant).await)
            .await;
        match connected {
            Ok(Some(tenant)) => Ok(tenant),
            Ok(None) => Err(Error::Conflict(format!(
                "tenant {} is connected to another customer",
                tenant.cloud_tenant_id
            ))),
            Err(e) if is_foreign_key_violation(&e) => Err(Error::NotFound),
            Err(e) => Err(db_error(e)),
        }
    }

    async fn list_tenants(&self, scope: CustomerScope, page: PageRequest) -> Result<Page<Tenant>> {
        let customer = scope.customer_id().as_uuid();
        let after = after_key(&page, |key| {
            read_text_key(key)?
                .parse::<Uuid>()
                .map_err(|_| SortKey::mismatch())
        })?;
        let conn = self.conn().await?;
        let mut rows = tenants::table
            .filter(tenants::customer_id.eq(customer))
            .into_boxed();
        if let Some(after) = after {
            rows = rows.filter(tenants::cloud_tenant_id.gt(after));
        }
        let rows = rows
            .order(tenants::cloud_tenant_id)
            .limit(page.fetch())
            .offset(page.offset() as i64)
            .select(TenantRow::as_select())
            .load::<TenantRow>(&mut &*conn);
        let total = tenants::table
            .filter(tenants::customer_id.eq(customer))
            .count()
            .get_result::<i64>(&mut &*conn);
        let (rows, total) = futures_util::future::try_join(rows, total)
            .await
            .map_err(db_error)?;
        let items = rows.into_iter().map(Tenant::from).collect();
        Ok(page.page_of(items, total.max(0) as u64, |t: &Tenant| {
            text_key(t.cloud_tenant_id.to_string())
        }))
    }

    async fn find_tenant(&self, scope: CustomerScope, id: CloudTenantId) -> Result<Tenant> {
        let mut conn = self.conn().await?;
        tenants::table
            .find((scope.customer_id().as_uuid(), id.as_uuid()))
            .select(TenantRow::as_select())
            .get_result::<TenantRow>(&mut conn)
            .await
            .map(Tenant::from)
            .map_err(db_error)
    }
}
