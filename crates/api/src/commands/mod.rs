//! Operator commands: each connects with the database's own credentials and acts for the
//! customer it names (`CustomerScope::for_operator`).

mod clients;
mod customers;
mod deliveries;
mod ingest;
mod keys;
mod operator;
mod secrets;
mod tenants;

use anyhow::Context as _;
use posture_store_postgres::migrations;
use serde_json::json;

use crate::{
    cli::{Cli, Command},
    output::emit,
};

/// Runs one command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let json = cli.json;
    match cli.command {
        Command::Serve(args) => crate::server::serve(*args).await,
        Command::Migrate(args) => {
            let url = args.database.url()?;
            let applied = migrations::run_pending(url)
                .await
                .context("migrating the database failed")?;
            if let Some(role) = &args.runtime_role {
                migrations::grant_runtime(url, role)
                    .await
                    .with_context(|| format!("granting the runtime role {role} failed"))?;
            }
            let role = args.runtime_role.as_ref().map(ToString::to_string);
            emit(
                json,
                &json!({ "applied": applied, "runtimeRole": role }),
                || {
                    let schema = match applied.len() {
                        0 => "the database schema is up to date".to_owned(),
                        n => format!("applied {n} migration(s): {}", applied.join(", ")),
                    };
                    match &role {
                        Some(role) => {
                            format!("{schema}; the runtime role {role} has its privileges")
                        }
                        None => schema,
                    }
                },
            )
        }
        Command::Customers(command) => customers::run(command, json).await,
        Command::Tenants(command) => tenants::run(command, json).await,
        Command::Keys(command) => keys::run(command, json).await,
        Command::Clients(command) => clients::run(command, json).await,
        Command::Ingest(args) => ingest::run(args, json).await,
        Command::Deliveries(command) => deliveries::run(command, json).await,
        Command::Secrets(command) => secrets::run(command, json).await,
    }
}
