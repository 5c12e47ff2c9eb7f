//! Webhook subscriptions: creating, reading and deactivating them (`mod.rs`; a
//! subscription's row in `row.rs`), their secrets and rotations (`secrets.rs`), and changing
//! them — a consumer's patch, the worker's disabling and hold expiry (`changes.rs`).

mod changes;
mod row;
mod secrets;

pub(crate) use changes::{disable_failing, expire_holds_and_secrets};
pub(crate) use row::SubscriptionRow;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use posture_domain::{
    CustomerScope, Error, Page, PageRequest, Result, WebhookId,
    page::SortKey,
    ports::{SubscriptionSecrets, WebhookRepository},
    secrets::SealedSecret,
    webhook::{NewSubscription, Subscription},
    webhook_change::SubscriptionPatch,
};
use uuid::Uuid;

use crate::{
    PgStore,
    error::db_error,
    schema::{customers, webhook_deliveries, webhook_subscriptions},
    sync::{after_key, after_time_key, read_time_key, time_key},
};

/// Deactivates an active subscription and cancels its pending deliveries (inside the
/// caller's transaction). `NotFound` when it is not active.
pub(crate) async fn deactivate(
    conn: &mut diesel_async::AsyncPgConnection,
    customer: Uuid,
    id: Uuid,
) -> QueryResult<SubscriptionRow> {
    let row = diesel::update(
        webhook_subscriptions::table
            .find((customer, id))
            .filter(webhook_subscriptions::active),
    )
    .set((
        webhook_subscriptions::active.eq(false),
        webhook_subscriptions::deactivated_at.eq(diesel::dsl::now),
    ))
    .returning(SubscriptionRow::as_returning())
    .get_result::<SubscriptionRow>(conn)
    .await?;
    diesel::update(
        webhook_deliveries::table
            .filter(webhook_deliveries::customer_id.eq(customer))
            .filter(webhook_deliveries::subscription_id.eq(id))
            .filter(webhook_deliveries::status.eq("pending")),
    )
    .set((
        webhook_deliveries::status.eq("cancelled"),
        webhook_deliveries::lease_until.eq(None::<DateTime<Utc>>),
        webhook_deliveries::leased_by.eq(None::<String>),
    ))
    .execute(conn)
    .await?;
    crate::data_versions::notify_data_changed(conn, &[customer]).await?;
    Ok(row)
}

/// Errors inside the create transaction.
enum CreateError {
    Full,
    Db(diesel::result::Error),
}

impl From<diesel::result::Error> for CreateError {
    fn from(e: diesel::result::Error) -> Self {
        CreateError::Db(e)
    }
}

#[async_trait]
impl WebhookRepository for PgStore {
    async fn create_subscription(
        &self,
        scope: CustomerScope,
        id: WebhookId,
        subscription: &NewSubscription,
        secret: &SealedSecret,
        max_active: u32,
    ) -> Result<Subscription> {
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        let created = conn
            .transaction(async |conn| {
                // Concurrent creates of the customer cannot pass the quota together: they
                // take turns under a lock of the transaction (on the coordinator with Citus,
                // where every statement of posture starts; a lock of the customer's row
                // would reach every node, and wait for a running pass).
                diesel::sql_query("SELECT pg_advisory_xact_lock(hashtextextended($1::text, 1001))")
                    .bind::<diesel::sql_types::Uuid, _>(customer)
                    .execute(conn)
                    .await?;
                customers::table
                    .find(customer)
                    .select(customers::id)
                    .get_result::<Uuid>(conn)
                    .await?;
                let active: i64 = webhook_subscriptions::table
                    .filter(webhook_subscriptions::customer_id.eq(customer))
                    .filter(webhook_subscriptions::active)
                    .count()
                    .get_result(conn)
                    .await?;
                if active >= i64::from(max_active) {
                    return Err(CreateError::Full);
                }
                let row = diesel::insert_into(webhook_subscriptions::table)
                    .values((
                        webhook_subscriptions::customer_id.eq(customer),
                        webhook_subscriptions::id.eq(id.as_uuid()),
                        webhook_subscriptions::name.eq(&subscription.name),
                        webhook_subscriptions::webhook_url.eq(&subscription.webhook_url),
                        webhook_subscriptions::webhook_type.eq(subscription.webhook_type.as_str()),
                        webhook_subscriptions::event_types.eq(subscription
                            .event_types
                            .iter()
                            .map(|e| e.as_str())
                            .collect::<Vec<_>>()),
                        webhook_subscriptions::secret_key_id.eq(&secret.key_id),
                        webhook_subscriptions::secret_nonce.eq(&secret.nonce),
                        webhook_subscriptions::secret_ciphertext.eq(&secret.ciphertext),
                        webhook_subscriptions::created_at.eq(diesel::dsl::now),
                    ))
                    .returning(SubscriptionRow::as_returning())
                    .get_result::<SubscriptionRow>(conn)
                    .await?;
                crate::data_versions::notify_data_changed(conn, &[customer]).await?;
                Ok(row)
            })
            .await;
        match created {
            Ok(row) => row.try_into(),
            Err(CreateError::Full) => Err(Error::Conflict(format!(
                "a customer may have at most {max_active} active webhook subscriptions; delete one first"
            ))),
            Err(CreateError::Db(e)) => Err(db_error(e)),
        }
    }

    async fn list_subscriptions(
        &self,
        scope: CustomerScope,
        page: PageRequest,
    ) -> Result<Page<Subscription>> {
        let customer = scope.customer_id().as_uuid();
        let after = after_key(&page, |key| {
            let (at, id) = read_time_key(key)?;
            Ok((at, id.parse::<Uuid>().map_err(|_| SortKey::mismatch())?))
        })?;
        let conn = self.conn().await?;
        let mut rows = webhook_subscriptions::table
            .filter(webhook_subscriptions::customer_id.eq(customer))
            .filter(webhook_subscriptions::active)
            .into_boxed();
        if let Some((at, id)) = after {
            rows = rows.filter(after_time_key!(
                "(webhook_subscriptions.created_at, webhook_subscriptions.id)",
                diesel::sql_types::Uuid,
                at,
                id
            ));
        }
        let rows = rows
            .order((webhook_subscriptions::created_at, webhook_subscriptions::id))
            .limit(page.fetch())
            .offset(page.offset() as i64)
            .select(SubscriptionRow::as_select())
            .load::<SubscriptionRow>(&mut &*conn);
        let total = webhook_subscriptions::table
            .filter(webhook_subscriptions::customer_id.eq(customer))
            .filter(webhook_subscriptions::active)
            .count()
            .get_result::<i64>(&mut &*conn);
        let (rows, total) = futures_util::future::try_join(rows, total)
            .await
            .map_err(db_error)?;
        let items = rows
            .into_iter()
            .map(Subscription::try_from)
            .collect::<Result<Vec<_>>>()?;
        Ok(
            page.page_of(items, total.max(0) as u64, |s: &Subscription| {
                time_key(s.created_at, s.id.to_string())
            }),
        )
    }

    async fn get_subscription(&self, scope: CustomerScope, id: WebhookId) -> Result<Subscription> {
        let mut conn = self.conn().await?;
        webhook_subscriptions::table
            .find((scope.customer_id().as_uuid(), id.as_uuid()))
            .filter(webhook_subscriptions::active)
            .select(SubscriptionRow::as_select())
            .get_result::<SubscriptionRow>(&mut conn)
            .await
            .map_err(db_error)?
            .try_into()
    }

    async fn deactivate_subscription(
        &self,
        scope: CustomerScope,
        id: WebhookId,
    ) -> Result<Subscription> {
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        conn.transaction(async |conn| deactivate(conn, customer, id.as_uuid()).await)
            .await
            .map_err(db_error)?
            .try_into()
    }

    async fn sealed_secrets(
        &self,
        scope: CustomerScope,
        id: WebhookId,
    ) -> Result<SubscriptionSecrets> {
        self.secrets_of(scope, id).await
    }

    async fn update_subscription(
        &self,
        scope: CustomerScope,
        id: WebhookId,
        patch: &SubscriptionPatch,
        expected: Option<&[u32]>,
    ) -> Result<Subscription> {
        self.apply_patch(scope, id, patch, expected).await
    }

    async fn rotate_secret(
        &self,
        scope: CustomerScope,
        id: WebhookId,
        secret: &SealedSecret,
        previous_expires_at: Option<DateTime<Utc>>,
        force: bool,
        expected: Option<&[u32]>,
    ) -> Result<Subscription> {
        self.replace_secret(scope, id, secret, previous_expires_at, force, expected)
            .await
    }
}
