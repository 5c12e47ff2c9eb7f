//! The databases of a Citus cluster (see [`posture_test_servers::citus`], re-exported here):
//! made on every node under the same name, with the extension in each, and the coordinator's
//! copy listing the workers.

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
pub use posture_test_servers::citus::*;

async fn connect(url: &str) -> AsyncPgConnection {
    AsyncPgConnection::establish(url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to a Citus node ({url}): {e}"))
}

async fn execute(conn: &mut AsyncPgConnection, sql: &str) {
    diesel::sql_query(sql)
        .execute(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Creates database `name` on the coordinator and on every worker, with the extension in
/// each, and lists the workers in the coordinator's copy (the coordinator too, so that
/// tables kept on it and reference tables have their place there). `admin_urls` are the
/// superuser URLs of each node's `postgres` database, the coordinator's first; `with_db`
/// makes the URL of another database of a node.
pub async fn create_database(
    admin_urls: &[String],
    name: &str,
    with_db: impl Fn(&str, &str) -> String,
) {
    for admin in admin_urls {
        let mut conn = connect(admin).await;
        execute(&mut conn, &format!("CREATE DATABASE {name}")).await;
    }
    join_database(admin_urls, name, with_db).await;
}

/// Makes database `name`, which exists on every node (with data on the coordinator, or
/// none), one Citus database: the extension in each node's copy, and the coordinator and
/// the workers listed in the coordinator's (as an operator does before distributing a
/// single-node database in place).
pub async fn join_database(
    admin_urls: &[String],
    name: &str,
    with_db: impl Fn(&str, &str) -> String,
) {
    for admin in admin_urls {
        let mut db = connect(&with_db(admin, name)).await;
        execute(&mut db, "CREATE EXTENSION IF NOT EXISTS citus").await;
    }
    let (coordinator, workers) = admin_urls.split_first().expect("a coordinator");
    let mut db = connect(&with_db(coordinator, name)).await;
    let (host, port) = host_port(coordinator);
    execute(
        &mut db,
        &format!("SELECT citus_set_coordinator_host('{host}', {port})"),
    )
    .await;
    for worker in workers {
        let (host, port) = host_port(worker);
        execute(&mut db, &format!("SELECT citus_add_node('{host}', {port})")).await;
    }
}

/// Runs `sql` on every node's `postgres` database (roles are the cluster's, not a database's).
pub async fn on_every_node(admin_urls: &[String], sql: &str) {
    for admin in admin_urls {
        execute(&mut connect(admin).await, sql).await;
    }
}

fn host_port(url: &str) -> (String, u16) {
    let parsed = url::Url::parse(url).expect("a node's URL");
    (
        parsed.host_str().unwrap_or("127.0.0.1").to_owned(),
        parsed.port().unwrap_or(5432),
    )
}
