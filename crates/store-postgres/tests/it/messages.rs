//! PostgreSQL's messages in another language: diesel-async keeps no SQLSTATE for most
//! errors, so the store tells a connection failure from a wrong request by the server's
//! English messages and asks every connection for English. Against a cluster of its own
//! whose `lc_messages` is German (a locale compiled into the test's directory).

use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use posture_domain::{Error, ports::TenantRepository, tenant::NewTenant};
use posture_store_postgres::{PgConfig, PgStore, migrations};
use posture_test_support::{
    fixtures,
    servers::{PostgresServer, compile_locale},
};

struct GermanServer {
    server: PostgresServer,
    dir: std::path::PathBuf,
}

impl GermanServer {
    fn start() -> Self {
        let dir =
            std::env::temp_dir().join(format!("posture-pgde-{}", uuid::Uuid::new_v4().simple()));
        let locales = dir.join("locales");
        let locale = compile_locale("de_DE", &locales).unwrap();
        let locpath = locales.display().to_string();
        let server = PostgresServer::start_with_env(
            &dir.join("cluster"),
            &format!("-c lc_messages={locale}"),
            &[("LOCPATH", &locpath)],
        )
        .unwrap();
        Self { server, dir }
    }

    fn url_as(&self, role: &str) -> String {
        format!(
            "postgres://{role}@127.0.0.1:{}/postgres",
            self.server.port()
        )
    }
}

impl Drop for GermanServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.dir.join("locales"));
    }
}

async fn execute(conn: &mut AsyncPgConnection, sql: &str) -> Result<usize, String> {
    diesel::sql_query(sql)
        .execute(conn)
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_statement_timeout_is_unavailable_though_the_server_answers_in_german() {
    let german = GermanServer::start();
    let url = german.url_as("postgres");
    let mut plain = AsyncPgConnection::establish(&url).await.unwrap();
    // The server speaks German to a connection that does not ask otherwise: without the
    // store's request for English, this is the message classification would see.
    execute(&mut plain, "SET statement_timeout = 50")
        .await
        .unwrap();
    let german_error = execute(&mut plain, "SELECT pg_sleep(2)").await.unwrap_err();
    assert!(
        german_error.contains("Anweisung") || german_error.contains("Zeitüberschreitung"),
        "the server did not answer in German: {german_error}"
    );
    execute(&mut plain, "SET statement_timeout = 0")
        .await
        .unwrap();

    migrations::run_pending(&url).await.unwrap();
    let mut config = PgConfig::new(url.clone(), posture_domain::clock::system());
    config.statement_timeout = Some(Duration::from_millis(200));
    let store = PgStore::new(&config).unwrap();
    assert_eq!(store.messages_not_in_english().await.unwrap(), None);
    let customer = fixtures::customer(&store, "A").await;

    // A statement stuck behind a lock ends at the statement timeout: 503, not 500.
    execute(&mut plain, "BEGIN").await.unwrap();
    execute(&mut plain, "LOCK TABLE tenants IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let tenant = NewTenant {
        cloud_tenant_id: fixtures::tenant_id().parse().unwrap(),
        display_name: "Contoso".into(),
        primary_domain: None,
    };
    let error = store.connect_tenant(customer, tenant).await.unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error:?}");
    execute(&mut plain, "ROLLBACK").await.unwrap();
}

#[tokio::test]
async fn a_role_that_may_not_choose_its_language_is_reported_until_it_is_granted() {
    let german = GermanServer::start();
    let mut admin = AsyncPgConnection::establish(&german.url_as("postgres"))
        .await
        .unwrap();
    execute(&mut admin, "CREATE ROLE posture_app LOGIN")
        .await
        .unwrap();
    let mut config = PgConfig::new(
        german.url_as("posture_app"),
        posture_domain::clock::system(),
    );
    config.max_connections = 1;
    let store = PgStore::new(&config).unwrap();
    assert_eq!(
        store.messages_not_in_english().await.unwrap().as_deref(),
        Some("de_DE.UTF-8"),
        "the start-up warning's condition"
    );

    // The fix the warning gives (PostgreSQL 15+); new connections then speak English.
    execute(
        &mut admin,
        "GRANT SET ON PARAMETER lc_messages TO posture_app",
    )
    .await
    .unwrap();
    let store = PgStore::new(&config).unwrap();
    assert_eq!(store.messages_not_in_english().await.unwrap(), None);
}
