//! The schema keeps the rules ARCHITECTURE.md claims, read from PostgreSQL's catalog after
//! the migrations ran, and `schema.rs` is exactly what the migrations make.
//!
//! The rules, for every table of customer data (a table with a `customer_id`):
//! 1. its primary key leads with `customer_id`, and is `(customer_id, id)` when it has an `id`;
//! 2. every foreign key to another customer table pairs `customer_id` with `customer_id`, so
//!    a row can only point at rows of its own customer;
//! 3. every unique index and every other index leads with `customer_id`.
//!
//! Keys and indexes that deliberately span customers are listed below with their reason;
//! these are also the only ones that stop the tables from being distributed by customer.

use diesel_async::AsyncPgConnection;
use posture_test_support::{
    TestDb,
    catalog::{self, ForeignKey, Index, Table},
};

/// Tables that name a customer but are looked up across customers.
const GLOBAL_TABLES: &[(&str, &str)] = &[
    ("customers", "the customers themselves"),
    (
        "api_keys",
        "a key is found by its hash before its customer is known; its id is global",
    ),
    (
        "cloud_tenant_owners",
        "a cloud tenant is connected to one customer only, whichever customer asks",
    ),
];

/// Indexes of customer tables that deliberately do not lead with `customer_id`.
const CROSS_CUSTOMER_INDEXES: &[(&str, &str)] = &[
    (
        "tenants_cloud_tenant_id_key",
        "a cloud tenant is connected to one customer only (on one node; on Citus the \
         rule is cloud_tenant_owners', and this index is dropped)",
    ),
    (
        "webhook_deliveries_due_idx",
        "the worker claims the due deliveries of every customer",
    ),
    (
        "webhook_deliveries_retention_idx",
        "the worker's retention sweep deletes the oldest finished deliveries of every customer",
    ),
    (
        "webhook_bodies_retention_idx",
        "the worker's retention sweep deletes the oldest bodies of every customer no delivery \
         refers to",
    ),
    (
        "analyzer_passes_finished_idx",
        "the worker's ingest gauges read the passes of every customer finished lately",
    ),
];

const CUSTOMER: &str = "customer_id";

fn is_customer_table(table: &Table) -> bool {
    table.columns.iter().any(|c| c.name == CUSTOMER)
        && !GLOBAL_TABLES.iter().any(|(name, _)| *name == table.name)
}

/// Every breach of the rules, one line each.
fn violations(tables: &[Table], indexes: &[Index], foreign_keys: &[ForeignKey]) -> Vec<String> {
    let customer_tables: Vec<&str> = tables
        .iter()
        .filter(|t| is_customer_table(t))
        .map(|t| t.name.as_str())
        .collect();
    let mut found = Vec::new();
    for table in tables.iter().filter(|t| is_customer_table(t)) {
        let has_id = table.columns.iter().any(|c| c.name == "id");
        let ok = if has_id {
            table.primary_key == [CUSTOMER, "id"]
        } else {
            table.primary_key.first().map(String::as_str) == Some(CUSTOMER)
        };
        if !ok {
            found.push(format!(
                "{}: primary key ({}) must be {}",
                table.name,
                table.primary_key.join(", "),
                if has_id {
                    "(customer_id, id)"
                } else {
                    "led by customer_id"
                }
            ));
        }
    }
    for fk in foreign_keys {
        if !customer_tables.contains(&fk.table.as_str())
            || !customer_tables.contains(&fk.referenced_table.as_str())
        {
            continue;
        }
        let paired = fk
            .columns
            .iter()
            .zip(&fk.referenced_columns)
            .any(|(from, to)| from == CUSTOMER && to == CUSTOMER);
        if !paired {
            found.push(format!(
                "{}.{}: ({}) -> {} ({}) does not pair customer_id with customer_id",
                fk.table,
                fk.name,
                fk.columns.join(", "),
                fk.referenced_table,
                fk.referenced_columns.join(", ")
            ));
        }
    }
    for index in indexes {
        if !customer_tables.contains(&index.table.as_str())
            || index.primary
            || CROSS_CUSTOMER_INDEXES.iter().any(|(n, _)| *n == index.name)
        {
            continue;
        }
        if index.columns.first().map(String::as_str) != Some(CUSTOMER) {
            found.push(format!(
                "{}.{}: ({}) does not lead with customer_id",
                index.table,
                index.name,
                index.columns.join(", ")
            ));
        }
    }
    found
}

async fn violations_of(conn: &mut AsyncPgConnection) -> Vec<String> {
    let tables = catalog::tables(conn).await;
    let indexes = catalog::indexes(conn).await;
    let foreign_keys = catalog::foreign_keys(conn).await;
    violations(&tables, &indexes, &foreign_keys)
}

#[tokio::test]
async fn every_customer_table_is_keyed_and_indexed_by_customer_first() {
    let db = TestDb::new().await;
    let mut conn = db.connection().await;
    let tables = catalog::tables(&mut conn).await;
    assert!(
        tables.iter().filter(|t| is_customer_table(t)).count() >= 13,
        "the rules see the customer tables"
    );
    assert_eq!(violations_of(&mut conn).await, Vec::<String>::new());
}

/// Where Citus keeps each table after `posture-api migrate`: `h` (distributed by hash),
/// `n` (a reference table), with its distribution column and colocation group; none for a
/// table Citus does not manage.
#[derive(diesel::QueryableByName, Debug)]
struct Placement {
    #[diesel(sql_type = diesel::sql_types::Text)]
    table_name: String,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    method: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    column: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Integer>)]
    colocation: Option<i32>,
}

#[tokio::test]
async fn migrate_distributes_every_customer_table_by_customer_on_citus_and_nothing_without() {
    let db = TestDb::new().await;
    let mut conn = db.connection().await;
    let customer_tables: Vec<String> = catalog::tables(&mut conn)
        .await
        .iter()
        .filter(|t| is_customer_table(t))
        .map(|t| t.name.clone())
        .collect();
    assert!(customer_tables.len() >= 20, "{customer_tables:?}");
    if !posture_test_support::citus::on_citus() {
        // PostgreSQL without Citus: the distribution does nothing, and says so by running.
        diesel_async::RunQueryDsl::execute(
            diesel::sql_query("SELECT posture_distribute()"),
            &mut conn,
        )
        .await
        .unwrap();
        let tables = catalog::tables(&mut conn).await;
        assert!(tables.iter().any(|t| t.name == "findings"));
        return;
    }
    let placements: Vec<Placement> = diesel_async::RunQueryDsl::load(
        diesel::sql_query(
            "SELECT c.relname::text AS table_name, p.partmethod::text AS method, \
                    column_to_column_name(p.logicalrelid, p.partkey) AS column, \
                    p.colocationid AS colocation \
             FROM pg_class c LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid \
             WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' \
               AND (p.logicalrelid IS NOT NULL OR c.relname IN ('api_keys', 'customers'))",
        ),
        &mut conn,
    )
    .await
    .unwrap();
    let of = |name: &str| placements.iter().find(|p| p.table_name == name);
    let tenants = of("tenants").expect("tenants");
    for table in &customer_tables {
        let p = of(table).unwrap_or_else(|| panic!("{table} is not distributed"));
        assert_eq!(
            (p.method.as_deref(), p.column.as_deref(), p.colocation),
            (Some("h"), Some("customer_id"), tenants.colocation),
            "{table} is distributed by customer, colocated with tenants"
        );
    }
    assert_eq!(of("customers").and_then(|p| p.method.as_deref()), Some("n"));
    let owners = of("cloud_tenant_owners").expect("cloud_tenant_owners");
    assert_eq!(
        (owners.method.as_deref(), owners.column.as_deref()),
        (Some("h"), Some("cloud_tenant_id"))
    );
    assert_ne!(owners.colocation, tenants.colocation);
    assert_eq!(
        of("api_keys").and_then(|p| p.method.clone()),
        None,
        "api_keys stays a plain table of the coordinator"
    );
    // Again: nothing left to do, nothing changes.
    posture_store_postgres::migrations::run_pending(db.url())
        .await
        .unwrap();
    let again: Vec<Placement> = diesel_async::RunQueryDsl::load(
        diesel::sql_query(
            "SELECT c.relname::text AS table_name, p.partmethod::text AS method, \
                    column_to_column_name(p.logicalrelid, p.partkey) AS column, \
                    p.colocationid AS colocation \
             FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid",
        ),
        &mut conn,
    )
    .await
    .unwrap();
    assert_eq!(again.len(), placements.len() - 1, "{again:?}");
}

#[tokio::test]
async fn a_table_that_breaks_each_rule_is_caught() {
    let db = TestDb::new().await;
    let mut conn = db.connection().await;
    for sql in [
        "CREATE TABLE bad_key (customer_id uuid NOT NULL, id text NOT NULL, PRIMARY KEY (id))",
        "CREATE UNIQUE INDEX bad_key_unique ON bad_key (id, customer_id)",
        "CREATE INDEX bad_key_index ON bad_key (id)",
        "CREATE UNIQUE INDEX identities_id_customer ON identities (id, customer_id)",
        "CREATE TABLE bad_ref (customer_id uuid NOT NULL, other_customer uuid NOT NULL,
             identity_id text NOT NULL, PRIMARY KEY (customer_id, identity_id),
             CONSTRAINT bad_ref_fk FOREIGN KEY (identity_id, other_customer)
                 REFERENCES identities (id, customer_id))",
    ] {
        diesel_async::RunQueryDsl::execute(diesel::sql_query(sql), &mut conn)
            .await
            .unwrap();
    }
    let found = violations_of(&mut conn).await;
    for expected in [
        "bad_key: primary key (id) must be (customer_id, id)",
        "bad_key.bad_key_unique",
        "bad_key.bad_key_index",
        "identities.identities_id_customer",
        "bad_ref.bad_ref_fk",
    ] {
        assert!(
            found.iter().any(|v| v.starts_with(expected)),
            "{expected} not caught: {found:?}"
        );
    }
    assert_eq!(found.len(), 5, "{found:?}");
}

#[tokio::test]
async fn schema_rs_is_what_the_migrations_make() {
    let db = TestDb::new().await;
    let mut conn = db.connection().await;
    let generated = catalog::diesel_schema(&catalog::tables(&mut conn).await);
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/schema.rs")).unwrap();
    assert!(
        committed == generated,
        "crates/store-postgres/src/schema.rs differs from the migrated schema: run \
         `cargo xtask schema` and commit the result"
    );
}

/// On Citus the suite runs the runtime role with `citus.multi_task_query_log_level =
/// error`: a statement that would run on more than one shard fails, so every test of a
/// per-customer route proves its statements reach one node; the statements posture marks
/// as spanning customers (`spanning.rs`, listed in docs/operations.md) are let through.
#[tokio::test]
async fn a_statement_across_customers_is_refused_on_citus_unless_posture_marks_it() {
    use posture_domain::ports::DeliveryRepository;
    let db = TestDb::new().await;
    let store = db.store();
    let mut runtime =
        <diesel_async::AsyncPgConnection as diesel_async::AsyncConnection>::establish(
            &db.runtime_url(),
        )
        .await
        .unwrap();
    let across = diesel_async::RunQueryDsl::execute(
        diesel::sql_query("SELECT count(*) FROM findings"),
        &mut runtime,
    )
    .await;
    if posture_test_support::citus::on_citus() {
        let error = across
            .expect_err("a count over every shard is refused")
            .to_string();
        assert!(error.contains("multi-task query"), "{error}");
    } else {
        across.unwrap();
    }
    // A marked one (the worker's queue gauges) runs on both.
    let depth = store.queue_depth().await.unwrap();
    assert_eq!((depth.pending, depth.due), (0, 0));
}

/// The quoted words of the definition of the check `name`.
async fn check_values(
    conn: &mut AsyncPgConnection,
    name: &str,
) -> std::collections::BTreeSet<String> {
    use diesel_async::RunQueryDsl as _;
    #[derive(diesel::QueryableByName)]
    struct Definition {
        #[diesel(sql_type = diesel::sql_types::Text)]
        definition: String,
    }
    let Definition { definition } = diesel::sql_query(
        "SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conname = $1",
    )
    .bind::<diesel::sql_types::Text, _>(name)
    .get_result(conn)
    .await
    .unwrap_or_else(|e| panic!("the check {name}: {e}"));
    definition
        .split('\'')
        .skip(1)
        .step_by(2)
        .filter(|word| word.starts_with("finding_") || *word == "ping")
        .map(str::to_owned)
        .collect()
}

/// An event type is declared once, in the domain (`EventType`, and `DeliveryEvent` with
/// `ping`); the database's checks must list exactly those, so a type added in Rust without
/// its migration (or the other way round) fails here rather than at the first insert.
#[tokio::test]
async fn the_event_type_checks_list_exactly_the_domain_event_types() {
    use posture_domain::{delivery::DeliveryEvent, webhook::EventType};
    let db = TestDb::new().await;
    let mut conn = db.connection().await;
    let subscribable: std::collections::BTreeSet<String> = EventType::ALL
        .iter()
        .map(|t| t.as_str().to_owned())
        .collect();
    let delivered: std::collections::BTreeSet<String> = DeliveryEvent::ALL
        .iter()
        .map(|t| t.as_str().to_owned())
        .collect();
    assert_eq!(
        check_values(&mut conn, "finding_events_event_type_check").await,
        subscribable
    );
    assert_eq!(
        check_values(&mut conn, "webhook_subscriptions_event_types_check").await,
        subscribable
    );
    assert_eq!(
        check_values(&mut conn, "webhook_deliveries_event_type_check").await,
        delivered
    );
}

/// `customers usage` counts every table of customer data: a table added later is counted
/// (or this fails).
#[tokio::test]
async fn the_usage_counts_every_table_of_customer_data() {
    let db = TestDb::new().await;
    let mut conn = db.connection().await;
    let tables = catalog::tables(&mut conn).await;
    let customer_tables: Vec<&str> = tables
        .iter()
        .filter(|t| t.columns.iter().any(|c| c.name == CUSTOMER))
        .map(|t| t.name.as_str())
        .collect();
    let counted: Vec<&str> = posture_store_postgres::usage::TABLES
        .iter()
        .map(|(_, table)| *table)
        .collect();
    for table in &customer_tables {
        assert!(
            counted.contains(table),
            "{table} is not counted in the usage"
        );
    }
    for table in &counted {
        assert!(
            customer_tables.contains(table),
            "{table} is no table of customer data"
        );
    }
}
