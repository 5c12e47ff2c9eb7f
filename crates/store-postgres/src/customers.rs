//! Customers.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use posture_domain::{
    Customer, CustomerId, Error, Result, customer::MAX_CUSTOMER_NAME_LEN, ports::CustomerRepository,
};
use uuid::Uuid;

use crate::{PgStore, error::db_error, schema::customers};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = customers, check_for_backend(diesel::pg::Pg))]
struct CustomerRow {
    id: Uuid,
    name: String,
    created_at: DateTime<Utc>,
}

impl From<CustomerRow> for Customer {
    fn from(row: CustomerRow) -> Self {
        Customer {
            id: CustomerId::from_uuid(row.id),
            name: row.name,
            created_at: row.created_at,
        }
    }
}

#[async_trait]
impl CustomerRepository for PgStore {
    async fn create_customer(&self, name: &str) -> Result<Customer> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > MAX_CUSTOMER_NAME_LEN {
            return Err(Error::invalid(
                "name",
                format!("must be 1 to {MAX_CUSTOMER_NAME_LEN} characters"),
            ));
        }
        let row = CustomerRow {
            id: CustomerId::generate().as_uuid(),
            name: name.to_owned(),
            created_at: self.clock.now(),
        };
        let mut conn = self.conn().await?;
        diesel::insert_into(customers::table)
            .values(&row)
            .returning(CustomerRow::as_returning())
            .get_result(&mut conn)
            .await
            .map(Customer::from)
            .map_err(db_error)
    }

    async fn list_customers(&self) -> Result<Vec<Customer>> {
        let mut conn = self.conn().await?;
        let rows: Vec<CustomerRow> = customers::table
            .order((customers::created_at, customers::id))
            .select(CustomerRow::as_select())
            .load(&mut conn)
            .await
            .map_err(db_error)?;
        Ok(rows.into_iter().map(Customer::from).collect())
    }
}
