//! `posture-api customers create|list`.

use posture_domain::{Customer, ports::CustomerRepository};
use serde_json::{Value, json};

use super::{fail, store};
use crate::{cli::CustomersCommand, output::emit};

fn to_json(c: &Customer) -> Value {
    json!({ "id": c.id.to_string(), "name": c.name, "createdAt": c.created_at })
}

pub async fn run(command: CustomersCommand, json: bool) -> anyhow::Result<()> {
    match command {
        CustomersCommand::Create { database, name } => {
            let customer = store(&database)?
                .create_customer(&name)
                .await
                .map_err(|e| fail("creating the customer", e))?;
            emit(json, &to_json(&customer), || customer.id.to_string())
        }
        CustomersCommand::List { database } => {
            let customers = store(&database)?
                .list_customers()
                .await
                .map_err(|e| fail("listing customers", e))?;
            let data: Vec<Value> = customers.iter().map(to_json).collect();
            emit(json, &json!({ "data": data }), || {
                customers
                    .iter()
                    .map(|c| format!("{}  {}  {}", c.id, c.created_at.to_rfc3339(), c.name))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
        }
    }
}
