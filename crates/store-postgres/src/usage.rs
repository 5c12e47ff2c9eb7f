//! What each customer's data takes, by category: every table of customer data counted by its
//! customer (rows, and their size as stored: `pg_column_size` of each row, its compressed
//! values included, indexes and free space not). It reads every row of the customers it
//! measures: an operator's command, and the worker's hourly gauges.

use std::collections::HashMap;

use async_trait::async_trait;
use diesel::{
    QueryableByName,
    sql_types::{BigInt, Uuid as SqlUuid},
};
use diesel_async::RunQueryDsl;
use posture_domain::{
    CustomerId, Result,
    ports::UsageRepository,
    usage::{CustomerUsage, StorageCategory, Usage},
};
use uuid::Uuid;

use crate::{
    PgStore,
    error::db_error,
    spanning::{Spanning, across_customers},
};

/// Every table of customer data, and what it counts as (a test checks that none is left
/// out).
pub const TABLES: &[(StorageCategory, &str)] = &[
    (StorageCategory::Findings, "findings"),
    (StorageCategory::Findings, "finding_totals"),
    (StorageCategory::Directory, "tenants"),
    (StorageCategory::Directory, "cloud_tenant_owners"),
    (StorageCategory::Directory, "analyzer_passes"),
    (StorageCategory::Directory, "identities"),
    (StorageCategory::Directory, "identity_totals"),
    (StorageCategory::Directory, "role_assignments"),
    (StorageCategory::Directory, "role_recommendations"),
    (StorageCategory::Directory, "upr_scores"),
    (StorageCategory::Directory, "upr_latest"),
    (StorageCategory::Triage, "finding_triage_history"),
    (StorageCategory::Triage, "triage_changes"),
    (StorageCategory::Events, "finding_events"),
    (StorageCategory::Deliveries, "webhook_subscriptions"),
    (StorageCategory::Deliveries, "webhook_deliveries"),
    (StorageCategory::Deliveries, "webhook_attempts"),
    (StorageCategory::Deliveries, "webhook_bodies"),
    (StorageCategory::Deliveries, "webhook_delivery_totals"),
    (StorageCategory::Deliveries, "webhook_latency"),
    (StorageCategory::Answers, "idempotency_keys"),
    (StorageCategory::Scim, "scim_users"),
    (StorageCategory::Scim, "scim_groups"),
    (StorageCategory::Scim, "scim_group_members"),
    (StorageCategory::Audit, "console_audit"),
    (StorageCategory::Accounts, "api_keys"),
    (StorageCategory::Accounts, "console_sso"),
    (StorageCategory::Accounts, "console_sign_ins"),
    (StorageCategory::Accounts, "console_sessions"),
    (StorageCategory::Accounts, "customer_data_versions"),
    (StorageCategory::Accounts, "customer_sync"),
];

#[derive(QueryableByName)]
struct Counted {
    #[diesel(sql_type = SqlUuid)]
    customer_id: Uuid,
    #[diesel(sql_type = BigInt)]
    rows: i64,
    #[diesel(sql_type = BigInt)]
    bytes: i64,
}

#[async_trait]
impl UsageRepository for PgStore {
    async fn storage_usage(&self, customer: Option<CustomerId>) -> Result<Vec<CustomerUsage>> {
        let mut conn = self.conn().await?;
        let counted: Vec<(StorageCategory, Counted)> =
            across_customers(&mut conn, Spanning::StorageUsage, |conn| {
                Box::pin(async move {
                    let mut counted = Vec::new();
                    for (category, table) in TABLES {
                        let only = if customer.is_some() {
                            "WHERE customer_id = $1"
                        } else {
                            "WHERE $1::uuid IS NULL"
                        };
                        // `table` is one of the names above, never input.
                        let rows: Vec<Counted> = diesel::sql_query(format!(
                            "SELECT customer_id, count(*)::int8 AS rows, \
                                    coalesce(sum(pg_column_size(t.*)), 0)::int8 AS bytes \
                             FROM {table} t {only} GROUP BY customer_id"
                        ))
                        .bind::<diesel::sql_types::Nullable<SqlUuid>, _>(
                            customer.map(|c| c.as_uuid()),
                        )
                        .load(conn)
                        .await?;
                        counted.extend(rows.into_iter().map(|row| (*category, row)));
                    }
                    Ok(counted)
                })
            })
            .await
            .map_err(db_error)?;
        let mut by_customer: HashMap<Uuid, Vec<(StorageCategory, Usage)>> = HashMap::new();
        for (category, row) in counted {
            let categories = by_customer.entry(row.customer_id).or_default();
            let usage = match categories.iter_mut().find(|(c, _)| *c == category) {
                Some((_, usage)) => usage,
                None => {
                    categories.push((category, Usage::default()));
                    &mut categories.last_mut().expect("just pushed").1
                }
            };
            usage.rows += row.rows.max(0) as u64;
            usage.bytes += row.bytes.max(0) as u64;
        }
        let mut usages: Vec<CustomerUsage> = by_customer
            .into_iter()
            .map(|(customer, mut categories)| {
                categories.sort_by_key(|(c, _)| StorageCategory::ALL.iter().position(|a| a == c));
                CustomerUsage {
                    customer: CustomerId::from_uuid(customer),
                    categories,
                }
            })
            .collect();
        usages.sort_by_key(|u| std::cmp::Reverse(u.total_bytes()));
        Ok(usages)
    }
}
