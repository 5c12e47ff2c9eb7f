//! The migrations apply to an empty database, once; on Citus they distribute a database
//! that has data in place.

use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_store_postgres::migrations;
use posture_test_support::{RUNTIME_ROLE, TestDb, fixtures};

#[tokio::test]
async fn migrations_apply_to_an_empty_database_and_then_none_is_pending() {
    let db = TestDb::empty().await;
    assert!(!migrations::pending(db.url()).await.unwrap().is_empty());
    let applied = migrations::run_pending(db.url()).await.unwrap();
    assert!(!applied.is_empty());
    assert!(migrations::pending(db.url()).await.unwrap().is_empty());
    assert!(
        migrations::run_pending(db.url()).await.unwrap().is_empty(),
        "a second run applies nothing"
    );
}

/// docs/operations.md, "Moving a single-node database onto Citus in place": a database
/// migrated and written on one node, then the extension and the workers added and
/// `posture-api migrate --runtime-role` run again. Every row moves to the shards, the
/// triggers come back on them, and the next pass runs on one node as the runtime role (whose
/// statements spanning shards Citus refuses in this suite).
#[tokio::test]
async fn a_single_node_database_with_data_is_distributed_in_place() {
    let Some(db) = TestDb::empty_on_every_node().await else {
        eprintln!("on Citus only (cargo xtask test --citus)");
        return;
    };
    let role = RUNTIME_ROLE.parse().unwrap();
    migrations::run_pending(db.url()).await.unwrap();
    migrations::grant_runtime(db.url(), &role).await.unwrap();
    let store = db.store();
    let mut tenants = Vec::new();
    for name in ["A", "B", "C"] {
        let (scope, tenant) = fixtures::customer_with_tenant(&store, name).await;
        let mut records = vec![fixtures::identity("u1", &tenant, "Ada")];
        records.extend(
            (0..40).map(|i| fixtures::finding(&format!("f{i:03}"), &tenant, "high", "open", "u1")),
        );
        fixtures::ingest(&store, scope, &fixtures::lines(&records))
            .await
            .unwrap();
        tenants.push((scope, tenant, records));
    }
    // A line of the console's audit log (append-only, by trigger).
    let (key, _) = posture_domain::api_key::NewApiKey::generate(
        tenants[1].0.customer_id(),
        "in place".into(),
        [posture_domain::Scope::ReadFindings].into_iter().collect(),
        None,
        chrono::Utc::now(),
    )
    .unwrap();
    posture_domain::ports::ApiKeyRepository::insert_key(
        &store,
        key,
        &posture_domain::console::Actor::Operator,
    )
    .await
    .unwrap();
    let before = db.row_counts().await;
    let mut conn = db.connection().await;
    let triggers = count(&mut conn, TRIGGERS).await;
    assert!(triggers >= 5, "{triggers} triggers");
    drop(store);

    db.join_citus().await;
    migrations::run_pending(db.url()).await.unwrap();
    migrations::grant_runtime(db.url(), &role).await.unwrap();
    assert_eq!(db.row_counts().await, before, "every row moved, none lost");
    assert_eq!(
        count(&mut conn, TRIGGERS).await,
        triggers,
        "every trigger is back"
    );
    assert_eq!(
        count(&mut conn, FUNCTIONS_ON_THE_COORDINATOR_ONLY).await,
        0,
        "every function of posture's is on the workers too"
    );
    let refused = diesel::sql_query("UPDATE console_audit SET action = 'rewritten'")
        .execute(&mut conn)
        .await;
    assert!(refused.is_err(), "the audit log stays append-only");
    let distributed: Count = diesel::sql_query(
        "SELECT count(*) AS n FROM pg_dist_partition \
         WHERE logicalrelid IN ('findings'::regclass, 'tenants'::regclass)",
    )
    .get_result(&mut conn)
    .await
    .unwrap();
    assert_eq!(distributed.n, 2);
    let (scope, tenant, mut records) = tenants.swap_remove(0);
    let customer = scope.customer_id().as_uuid();
    // The data-version trigger of tenants is back on its shard.
    let was = version(&mut conn, customer).await;
    diesel::sql_query(format!(
        "UPDATE tenants SET display_name = 'renamed' WHERE customer_id = '{customer}'"
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    assert_eq!(version(&mut conn, customer).await, was + 1);
    // The next pass runs on the customer's node.
    records.push(fixtures::finding("f999", &tenant, "critical", "open", "u1"));
    let store = db.store();
    let summary = fixtures::ingest(&store, scope, &fixtures::lines(&records))
        .await
        .unwrap();
    assert_eq!(summary.counts.new_findings, 1);
    assert!(version(&mut conn, customer).await > was + 1);
}

/// posture's triggers (of its own functions, not Citus's) on the tables it distributes (the
/// keys' stay on the coordinator).
const TRIGGERS: &str = "SELECT count(*) AS n FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid \
     JOIN pg_proc f ON f.oid = t.tgfoid \
     WHERE NOT t.tgisinternal AND c.relnamespace = 'public'::regnamespace \
       AND f.pronamespace = 'public'::regnamespace AND c.relname <> 'api_keys'";

/// posture's functions the workers do not have.
const FUNCTIONS_ON_THE_COORDINATOR_ONLY: &str = "SELECT count(*) AS n FROM pg_proc p \
     WHERE p.pronamespace = 'public'::regnamespace AND p.prokind IN ('f', 'p') \
       AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass \
                       AND d.objid = p.oid AND d.deptype = 'e') \
       AND NOT EXISTS (SELECT 1 FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass \
                       AND o.objid = p.oid)";

async fn count(conn: &mut AsyncPgConnection, sql: &str) -> i64 {
    diesel::sql_query(sql)
        .get_result::<Count>(conn)
        .await
        .unwrap()
        .n
}

/// The customer's data version.
async fn version(conn: &mut AsyncPgConnection, customer: uuid::Uuid) -> i64 {
    diesel::sql_query(format!(
        "SELECT version FROM customer_data_versions WHERE customer_id = '{customer}'"
    ))
    .get_result::<Version>(conn)
    .await
    .unwrap()
    .version
}

#[derive(diesel::QueryableByName)]
struct Version {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    version: i64,
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}
