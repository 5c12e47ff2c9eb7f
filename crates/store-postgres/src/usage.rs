//! What each customer's data takes, by category: every table of customer data counted by its
//! customer (rows, and their size as stored: each value's `pg_column_size`, compressed or
//! out of line as it is kept, without reading what is out of line, and a row header of 24
//! bytes; indexes and free space not). It reads every row of the customers it measures: an
//! operator's command, and the worker's hourly gauges (one worker at a time).

use std::collections::HashMap;

use async_trait::async_trait;
use diesel::{
    QueryResult, QueryableByName,
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
    (StorageCategory::Accounts, "credential_addresses"),
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

/// The lock a measure of every customer holds for its transaction (arbitrary but fixed;
/// claims and migrations use others).
const MEASURE_LOCK: i64 = 0x706f_7374_7572_6511;

#[derive(QueryableByName)]
struct Taken {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    taken: bool,
}

#[derive(QueryableByName)]
struct Column {
    #[diesel(sql_type = diesel::sql_types::Text)]
    name: String,
}

/// The stored size of a row of `table`: its values' `pg_column_size` summed, with the row's
/// header. A compressed value counts at its compressed size; a value stored out of line
/// counts at what it takes there, read from its pointer (the value itself is never fetched).
async fn row_size(conn: &mut diesel_async::AsyncPgConnection, table: &str) -> QueryResult<String> {
    let columns: Vec<Column> = diesel::sql_query(
        "SELECT attname::text AS name FROM pg_attribute \
         WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
    )
    .bind::<diesel::sql_types::Text, _>(table)
    .load(conn)
    .await?;
    let mut size = String::from("24");
    for column in columns {
        // A column's name, quoted as an identifier (from the catalog, never input).
        let quoted = column.name.replace('"', "\"\"");
        size.push_str(&format!(" + coalesce(pg_column_size(t.\"{quoted}\"), 0)"));
    }
    Ok(size)
}

/// Counts every table of customer data by customer (`customer`'s alone when given), in the
/// transaction `conn` is in.
async fn count(
    conn: &mut diesel_async::AsyncPgConnection,
    customer: Option<CustomerId>,
) -> QueryResult<Vec<(StorageCategory, Counted)>> {
    let mut counted = Vec::new();
    for (category, table) in TABLES {
        let only = if customer.is_some() {
            "WHERE customer_id = $1"
        } else {
            "WHERE $1::uuid IS NULL"
        };
        let size = row_size(conn, table).await?;
        // `table` is one of the names above, never input.
        let rows: Vec<Counted> = diesel::sql_query(format!(
            "SELECT customer_id, count(*)::int8 AS rows, coalesce(sum({size}), 0)::int8 AS bytes \
             FROM {table} t {only} GROUP BY customer_id"
        ))
        .bind::<diesel::sql_types::Nullable<SqlUuid>, _>(customer.map(|c| c.as_uuid()))
        .load(conn)
        .await?;
        counted.extend(rows.into_iter().map(|row| (*category, row)));
    }
    Ok(counted)
}

#[async_trait]
impl UsageRepository for PgStore {
    async fn storage_usage(&self, customer: Option<CustomerId>) -> Result<Vec<CustomerUsage>> {
        let mut conn = self.conn().await?;
        let counted = across_customers(&mut conn, Spanning::StorageUsage, |conn| {
            Box::pin(count(conn, customer))
        })
        .await
        .map_err(db_error)?;
        Ok(by_customer(counted))
    }

    async fn storage_usage_alone(&self) -> Result<Option<Vec<CustomerUsage>>> {
        let mut conn = self.conn().await?;
        let counted = across_customers(&mut conn, Spanning::StorageUsage, |conn| {
            Box::pin(async move {
                let lock: Taken = diesel::sql_query(format!(
                    "SELECT pg_try_advisory_xact_lock({MEASURE_LOCK}) AS taken"
                ))
                .get_result(conn)
                .await?;
                if !lock.taken {
                    return Ok(None);
                }
                count(conn, None).await.map(Some)
            })
        })
        .await
        .map_err(db_error)?;
        Ok(counted.map(by_customer))
    }
}

/// The counts summed by customer and category, the largest customer first.
fn by_customer(counted: Vec<(StorageCategory, Counted)>) -> Vec<CustomerUsage> {
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
    usages
}
