//! What every operator command shares: its store, the customer it names, its errors.

use anyhow::Context as _;
use posture_domain::{CustomerId, CustomerScope};
use posture_startup::DatabaseArgs;
use posture_store_postgres::PgStore;

/// A store for one operator command (a small pool), on the system's clock: each command
/// starts here.
pub(super) fn store(database: &DatabaseArgs) -> anyhow::Result<PgStore> {
    let mut config = database.pg_config(posture_domain::clock::system())?;
    config.max_connections = 2;
    PgStore::new(&config).context("DATABASE_URL")
}

/// The scope of `--customer ID`.
pub(super) fn customer_scope(id: &str) -> anyhow::Result<CustomerScope> {
    let id: CustomerId = id
        .parse()
        .map_err(|_| anyhow::anyhow!("--customer: {id:?} is not a customer id (a UUID)"))?;
    Ok(CustomerScope::for_operator(id))
}

/// Turns a domain error into a message for operators, keeping its causes.
pub(super) fn fail(context: &str, e: posture_domain::Error) -> anyhow::Error {
    match e {
        posture_domain::Error::NotFound => anyhow::anyhow!("{context}: not found"),
        other => anyhow::Error::new(other).context(context.to_owned()),
    }
}
