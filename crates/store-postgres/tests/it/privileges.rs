//! The runtime role (`posture-api migrate --runtime-role`) holds only what `serve`, the
//! worker and the operator commands need: the rest of the suite runs its stores as that role
//! (`TestDb::store`), which shows the grants suffice; these tests show what it cannot do.

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use posture_store_postgres::migrations::{self, RuntimeRole};
use posture_test_support::{RUNTIME_ROLE, TestDb};

async fn runtime(db: &TestDb) -> AsyncPgConnection {
    let mut conn = AsyncPgConnection::establish(&db.runtime_url())
        .await
        .unwrap();
    if posture_test_support::citus::on_citus() {
        // The suite has Citus refuse the runtime role's statements that span shards before
        // they run: these must meet the permission checks.
        diesel::sql_query("SET citus.multi_task_query_log_level = off")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    conn
}

/// The error PostgreSQL gives `sql` run as the runtime role (panics when it succeeds).
async fn refused(conn: &mut AsyncPgConnection, sql: &str) -> String {
    match diesel::sql_query(sql).execute(conn).await {
        Ok(_) => panic!("the runtime role could run: {sql}"),
        Err(e) => e.to_string(),
    }
}

fn assert_denied(error: &str, sql: &str) {
    assert!(
        error.contains("permission denied") || error.contains("must be owner"),
        "{sql}: refused for another reason: {error}"
    );
}

#[tokio::test]
async fn the_runtime_role_cannot_drop_or_disable_the_api_key_triggers() {
    let db = TestDb::new().await;
    let mut conn = runtime(&db).await;
    for sql in [
        "DROP TRIGGER api_keys_immutable ON api_keys",
        "DROP TRIGGER api_keys_notify_update ON api_keys",
        "ALTER TABLE api_keys DISABLE TRIGGER ALL",
        "ALTER TABLE api_keys DISABLE TRIGGER api_keys_notify_update",
        "CREATE OR REPLACE FUNCTION api_keys_immutable() RETURNS trigger LANGUAGE plpgsql \
         AS $$ BEGIN RETURN NEW; END $$",
        "DROP FUNCTION api_keys_notify() CASCADE",
        "SET session_replication_role = replica",
    ] {
        assert_denied(&refused(&mut conn, sql).await, sql);
    }
}

#[tokio::test]
async fn the_runtime_role_cannot_alter_truncate_or_create_tables() {
    let db = TestDb::new().await;
    let mut conn = runtime(&db).await;
    for sql in [
        "ALTER TABLE findings ADD COLUMN planted text",
        "ALTER TABLE api_keys OWNER TO CURRENT_USER",
        "DROP TABLE console_audit",
        "TRUNCATE api_keys",
        "TRUNCATE findings",
        "CREATE TABLE planted (id int)",
        "CREATE INDEX planted ON findings (title)",
        "SELECT posture_analyze('api_keys')",
    ] {
        let error = refused(&mut conn, sql).await;
        // The owner's ANALYZE function serves the tables a pass grows, no others.
        if sql.starts_with("SELECT posture_analyze") {
            assert!(
                error.contains("is not a table posture refreshes"),
                "{sql}: {error}"
            );
        } else {
            assert_denied(&error, sql);
        }
    }
}

#[tokio::test]
async fn the_runtime_role_cannot_rewrite_a_key_or_delete_what_it_only_appends() {
    let db = TestDb::new().await;
    let mut conn = runtime(&db).await;
    for sql in [
        "UPDATE api_keys SET key_hash = 'planted'",
        "UPDATE api_keys SET scopes = ARRAY['manage:webhooks']",
        "UPDATE api_keys SET customer_id = gen_random_uuid()",
        "UPDATE api_keys SET expires_at = NULL",
        "DELETE FROM api_keys",
        "UPDATE console_audit SET actor_name = 'planted'",
        "DELETE FROM customers",
        "DELETE FROM findings",
        "DELETE FROM webhook_subscriptions",
        "UPDATE analyzer_passes SET findings = 0",
        "UPDATE findings SET customer_id = '6f2c1d1e-0c4b-4f31-9a67-1f6c7b1d2e3f'",
        "UPDATE webhook_deliveries SET customer_id = '6f2c1d1e-0c4b-4f31-9a67-1f6c7b1d2e3f'",
        // The delivery log's totals: written by the owner's triggers only.
        "UPDATE webhook_delivery_totals SET total = 0",
        "INSERT INTO webhook_delivery_totals VALUES ('6f2c1d1e-0c4b-4f31-9a67-1f6c7b1d2e3f', \
         '6f2c1d1e-0c4b-4f31-9a67-1f6c7b1d2e3f', 'ping', 'delivered', 1)",
    ] {
        let error = refused(&mut conn, sql).await;
        // Citus refuses any change of a row's customer (its distribution column) first.
        if posture_test_support::citus::on_citus()
            && error.contains("modifying the partition value of rows is not allowed")
        {
            continue;
        }
        assert_denied(&error, sql);
    }
}

#[tokio::test]
async fn the_runtime_role_deletes_audit_lines_past_30_days_only() {
    let db = TestDb::new().await;
    let mut owner = AsyncPgConnection::establish(db.url()).await.unwrap();
    diesel::sql_query(
        "INSERT INTO customers (id, name) VALUES ('6f2c1d1e-0c4b-4f31-9a67-1f6c7b1d2e3f', 'A')",
    )
    .execute(&mut owner)
    .await
    .unwrap();
    diesel::sql_query(
        "INSERT INTO console_audit (customer_id, id, at, actor_kind, actor_subject, actor_name, \
                                    action, detail) \
         VALUES ('6f2c1d1e-0c4b-4f31-9a67-1f6c7b1d2e3f', gen_random_uuid(), now(), 'operator', \
                 'operator', 'posture operator', 'sso.cleared', 'young'), \
                ('6f2c1d1e-0c4b-4f31-9a67-1f6c7b1d2e3f', gen_random_uuid(), \
                 now() - interval '31 days', 'operator', 'operator', 'posture operator', \
                 'sso.cleared', 'old')",
    )
    .execute(&mut owner)
    .await
    .unwrap();
    let mut conn = runtime(&db).await;
    // A line younger than 30 days: refused by the table's trigger, whoever asks.
    let young = "DELETE FROM console_audit WHERE detail = 'young'";
    let error = refused(&mut conn, young).await;
    assert!(error.contains("append-only"), "{error}");
    // An older one: the retention sweep's to delete.
    let deleted = diesel::sql_query("DELETE FROM console_audit WHERE detail = 'old'")
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(deleted, 1);
}

#[tokio::test]
async fn the_runtime_role_cannot_read_another_schema() {
    let db = TestDb::new().await;
    let mut owner = db.connection().await;
    diesel::sql_query("CREATE SCHEMA billing")
        .execute(&mut owner)
        .await
        .unwrap();
    diesel::sql_query("CREATE TABLE billing.invoices (id int)")
        .execute(&mut owner)
        .await
        .unwrap();
    let mut conn = runtime(&db).await;
    for sql in [
        "SELECT * FROM billing.invoices",
        "CREATE TABLE billing.planted (id int)",
    ] {
        assert_denied(&refused(&mut conn, sql).await, sql);
    }
}

#[tokio::test]
async fn no_key_column_of_any_table_is_updatable_by_the_runtime_role() {
    #[derive(diesel::QueryableByName)]
    struct Column {
        #[diesel(sql_type = diesel::sql_types::Text)]
        name: String,
    }
    let db = TestDb::new().await;
    let mut owner = db.connection().await;
    // Primary-key columns (a row's identity and its customer) with UPDATE for the role.
    let updatable: Vec<Column> = diesel::sql_query(
        "SELECT c.relname || '.' || a.attname AS name \
         FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid \
         JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public' \
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey) \
         WHERE i.indisprimary AND has_column_privilege($1, c.oid, a.attnum, 'UPDATE') \
         ORDER BY 1",
    )
    .bind::<diesel::sql_types::Text, _>(RUNTIME_ROLE)
    .load(&mut owner)
    .await
    .unwrap();
    let names: Vec<&str> = updatable.iter().map(|c| c.name.as_str()).collect();
    assert!(names.is_empty(), "updatable key columns: {names:?}");
    // And nothing beyond SELECT, INSERT, UPDATE, DELETE on any table.
    let extra: Vec<Column> = diesel::sql_query(
        "SELECT c.relname || ' ' || p.privilege AS name FROM pg_class c \
         JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public' \
         CROSS JOIN unnest(ARRAY['TRUNCATE', 'REFERENCES', 'TRIGGER']) AS p(privilege) \
         WHERE c.relkind = 'r' AND has_table_privilege($1, c.oid, p.privilege) ORDER BY 1",
    )
    .bind::<diesel::sql_types::Text, _>(RUNTIME_ROLE)
    .load(&mut owner)
    .await
    .unwrap();
    let extra: Vec<&str> = extra.iter().map(|c| c.name.as_str()).collect();
    assert!(extra.is_empty(), "privileges beyond the grants: {extra:?}");
}

#[tokio::test]
async fn granting_again_revokes_what_someone_added_by_hand() {
    let db = TestDb::new().await;
    let mut owner = db.connection().await;
    for sql in [
        "GRANT DELETE, TRUNCATE ON api_keys TO {role}",
        "GRANT UPDATE (key_hash) ON api_keys TO {role}",
        "GRANT CREATE ON SCHEMA public TO {role}",
    ] {
        diesel::sql_query(sql.replace("{role}", RUNTIME_ROLE))
            .execute(&mut owner)
            .await
            .unwrap();
    }
    let mut conn = runtime(&db).await;
    diesel::sql_query("DELETE FROM api_keys WHERE false")
        .execute(&mut conn)
        .await
        .expect("the hand-made grant works before migrate runs again");
    migrations::grant_runtime(db.url(), &RUNTIME_ROLE.parse().unwrap())
        .await
        .unwrap();
    for sql in [
        "DELETE FROM api_keys WHERE false",
        "TRUNCATE api_keys",
        "UPDATE api_keys SET key_hash = key_hash WHERE false",
        "CREATE TABLE planted (id int)",
    ] {
        assert_denied(&refused(&mut conn, sql).await, sql);
    }
}

#[tokio::test]
async fn the_runtime_role_sees_no_pending_migration_without_creating_anything() {
    let db = TestDb::new().await;
    assert_eq!(
        migrations::pending(&db.runtime_url()).await.unwrap(),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn granting_refuses_a_missing_role_a_superuser_and_the_owner_itself() {
    let db = TestDb::new().await;
    #[derive(diesel::QueryableByName)]
    struct Me {
        #[diesel(sql_type = diesel::sql_types::Text)]
        name: String,
    }
    let me: Me = diesel::sql_query("SELECT current_user::text AS name")
        .get_result(&mut db.connection().await)
        .await
        .unwrap();
    let missing = format!("posture_missing_{}", uuid::Uuid::new_v4().simple());
    let error = migrations::grant_runtime(db.url(), &missing.parse().unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("does not exist") && error.contains("CREATE ROLE"),
        "{error}"
    );
    // The test server's own role owns the tables (and is a superuser there).
    let error = migrations::grant_runtime(db.url(), &me.name.parse().unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("running the migrations"), "{error}");
    diesel::sql_query(
        "DO $$ BEGIN CREATE ROLE posture_test_superuser SUPERUSER NOLOGIN; \
         EXCEPTION WHEN duplicate_object THEN NULL; END $$",
    )
    .execute(&mut db.connection().await)
    .await
    .unwrap();
    let error = migrations::grant_runtime(db.url(), &"posture_test_superuser".parse().unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("superuser"), "{error}");
}

#[test]
fn a_runtime_role_name_is_a_plain_identifier() {
    for good in ["posture_app", "app2", "_x"] {
        assert!(good.parse::<RuntimeRole>().is_ok(), "{good}");
    }
    for bad in [
        "",
        "Posture",
        "2app",
        "app; DROP TABLE api_keys",
        "app\"",
        "pg_read_all_data",
        &"a".repeat(64),
    ] {
        assert!(bad.parse::<RuntimeRole>().is_err(), "{bad:?}");
    }
}

#[tokio::test]
async fn the_owners_functions_qualify_their_names_and_search_pg_temp_last() {
    let db = TestDb::new().await;
    let mut conn = runtime(&db).await;
    #[derive(diesel::QueryableByName)]
    struct Setting {
        #[diesel(sql_type = diesel::sql_types::Text)]
        name: String,
        #[diesel(sql_type = diesel::sql_types::Text)]
        config: String,
    }
    let settings: Vec<Setting> = diesel::sql_query(
        "SELECT proname::text AS name, array_to_string(proconfig, ',') AS config \
         FROM pg_proc \
         WHERE proname IN ('posture_analyze', 'posture_uuid_v7', 'count_webhook_deliveries')",
    )
    .load(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        settings.len(),
        4,
        "posture_analyze (two), posture_uuid_v7 and the delivery log's counting trigger"
    );
    for setting in settings {
        assert_eq!(
            setting.config, "search_path=pg_catalog, pg_temp",
            "{}: a temporary table of the caller must not stand in for one of posture's",
            setting.name
        );
    }
    // And it still analyzes what it may, the table or one customer's rows (on Citus, on
    // the node of that customer's shard).
    for sql in [
        "SELECT posture_analyze('findings')",
        "SELECT posture_analyze('6f2c1d1e-0c4b-4f31-9a67-1f6c7b1d2e3f', 'findings')",
    ] {
        diesel::sql_query(sql).execute(&mut conn).await.unwrap();
    }
}
