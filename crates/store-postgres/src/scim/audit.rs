//! SCIM's lines of the customer's audit log: each change's, by the key that made it, in the
//! change's transaction.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::{KeyId, Result};
use uuid::Uuid;

use crate::{
    error::db_error,
    schema::{api_keys, console_audit},
};

/// The key making SCIM's writes, as its audit lines name it (read before the write's
/// transaction: on Citus keys are a plain table of the coordinator).
pub(crate) struct Writer {
    customer: Uuid,
    key: Uuid,
    name: String,
    prefix: String,
}

impl Writer {
    pub(crate) async fn of(
        conn: &mut AsyncPgConnection,
        customer: Uuid,
        by: KeyId,
    ) -> Result<Self> {
        let (name, prefix) = api_keys::table
            .find(by.as_uuid())
            .filter(api_keys::customer_id.eq(customer))
            .select((api_keys::name, api_keys::prefix))
            .first::<(String, String)>(conn)
            .await
            .optional()
            .map_err(db_error)?
            .unwrap_or_default();
        Ok(Self {
            customer,
            key: by.as_uuid(),
            name,
            prefix,
        })
    }

    /// The audit line of one change, in the caller's transaction.
    pub(crate) async fn audit(
        &self,
        conn: &mut AsyncPgConnection,
        action: &str,
        detail: String,
    ) -> QueryResult<()> {
        diesel::insert_into(console_audit::table)
            .values((
                console_audit::customer_id.eq(self.customer),
                console_audit::id.eq(Uuid::now_v7()),
                console_audit::actor_kind.eq("key"),
                console_audit::actor_subject.eq(self.key.to_string()),
                console_audit::actor_name.eq(&self.name),
                console_audit::action.eq(action),
                console_audit::key_id.eq(self.key),
                console_audit::key_name.eq(&self.name),
                console_audit::key_prefix.eq(&self.prefix),
                console_audit::detail.eq(detail),
            ))
            .execute(conn)
            .await
            .map(drop)
    }
}
