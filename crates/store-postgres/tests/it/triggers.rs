//! The rules the schema keeps by triggers, whoever writes, even in SQL typed by an
//! operator (the table owner here): a key is immutable apart from its revocation, the
//! console's audit log is append-only, a key's change notifies the serving processes, and
//! a change to tenants or subscriptions bumps the customer's data version. On Citus the
//! triggers of distributed tables run on the worker nodes: the suite runs there too.

use std::{pin::pin, time::Duration};

use chrono::Utc;
use diesel::QueryableByName;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::StreamExt as _;
use posture_domain::{
    CustomerScope, Scope, api_key::NewApiKey, console::Actor, ports::ApiKeyRepository,
};
use posture_test_support::{
    TestDb,
    fixtures::{customer, customer_with_tenant},
};

async fn owner(db: &TestDb) -> AsyncPgConnection {
    AsyncPgConnection::establish(db.url()).await.unwrap()
}

/// The error of `sql` run as the owner (panics when it succeeds).
async fn refused(conn: &mut AsyncPgConnection, sql: &str) -> String {
    match diesel::sql_query(sql).execute(conn).await {
        Ok(_) => panic!("ran: {sql}"),
        Err(e) => e.to_string(),
    }
}

/// A key of the customer, issued as the operator (which writes an audit line); its id.
async fn issue(store: &posture_store_postgres::PgStore, scope: CustomerScope) -> uuid::Uuid {
    let (key, _) = NewApiKey::generate(
        scope.customer_id(),
        "trigger test".into(),
        [Scope::ReadFindings].into_iter().collect(),
        None,
        Utc::now(),
    )
    .unwrap();
    store
        .insert_key(key, &Actor::Operator)
        .await
        .unwrap()
        .id
        .as_uuid()
}

#[tokio::test]
async fn a_keys_scopes_owner_and_expiry_cannot_change_and_the_audit_log_only_grows() {
    let db = TestDb::new().await;
    let store = db.store();
    let scope = customer(&store, "A").await;
    let key = issue(&store, scope).await;
    let c = scope.customer_id().as_uuid();
    let mut conn = owner(&db).await;
    for sql in [
        format!("UPDATE api_keys SET scopes = ARRAY['manage:webhooks'] WHERE id = '{key}'"),
        format!("UPDATE api_keys SET expires_at = '2999-01-01' WHERE id = '{key}'"),
        format!("UPDATE api_keys SET created_by = 'someone' WHERE id = '{key}'"),
    ] {
        let error = refused(&mut conn, &sql).await;
        assert!(
            error.contains("immutable apart from revocation"),
            "{sql}: {error}"
        );
    }
    for sql in [
        format!("UPDATE console_audit SET actor_name = 'someone' WHERE customer_id = '{c}'"),
        format!("DELETE FROM console_audit WHERE customer_id = '{c}'"),
    ] {
        let error = refused(&mut conn, &sql).await;
        assert!(error.contains("append-only"), "{sql}: {error}");
    }
    // Revocation stays possible.
    diesel::sql_query(format!(
        "UPDATE api_keys SET revoked_at = now() WHERE id = '{key}'"
    ))
    .execute(&mut conn)
    .await
    .unwrap();
}

#[tokio::test]
async fn a_key_revoked_in_sql_notifies_the_processes_listening_on_the_database() {
    let db = TestDb::new().await;
    let store = db.store();
    let scope = customer(&store, "A").await;
    let key = issue(&store, scope).await;
    let mut listen = owner(&db).await;
    diesel::sql_query("LISTEN posture_keys")
        .execute(&mut listen)
        .await
        .unwrap();
    diesel::sql_query(format!(
        "UPDATE api_keys SET revoked_at = now() WHERE id = '{key}'"
    ))
    .execute(&mut owner(&db).await)
    .await
    .unwrap();
    let mut notifications = pin!(listen.notifications_stream());
    let heard = tokio::time::timeout(Duration::from_secs(5), notifications.next())
        .await
        .expect("a notification within 5 s")
        .unwrap()
        .unwrap();
    assert_eq!(heard.payload, key.to_string());
}

#[tokio::test]
async fn a_tenant_changed_in_sql_bumps_its_customers_data_version() {
    #[derive(QueryableByName)]
    struct Version {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        version: i64,
    }
    let db = TestDb::new().await;
    let store = db.store();
    let (scope, tenant) = customer_with_tenant(&store, "A").await;
    let c = scope.customer_id().as_uuid();
    let mut conn = owner(&db).await;
    let version = format!(
        "SELECT coalesce((SELECT version FROM customer_data_versions \
                          WHERE customer_id = '{c}'), 0) AS version"
    );
    let before = diesel::sql_query(&version)
        .get_result::<Version>(&mut conn)
        .await
        .unwrap()
        .version;
    diesel::sql_query(format!(
        "UPDATE tenants SET display_name = 'Renamed' \
         WHERE customer_id = '{c}' AND cloud_tenant_id = '{tenant}'"
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    let after = diesel::sql_query(&version)
        .get_result::<Version>(&mut conn)
        .await
        .unwrap()
        .version;
    assert_eq!(after, before + 1);
}
