//! Signing secrets of subscriptions: reading them sealed, rotating with an overlap, and
//! re-sealing them under a new `POSTURE_SECRET_KEY` (current and previous alike).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::{
    prelude::*,
    sql_types::{Bool, Bytea, Integer, Nullable, Text, Timestamptz, Uuid as SqlUuid},
};
use diesel_async::{AsyncConnection, RunQueryDsl};
use posture_domain::{
    CustomerId, CustomerScope, Error, Result, WebhookId,
    ports::{SecretRotationRepository, StoredSecret, SubscriptionSecrets},
    secrets::SealedSecret,
    webhook::Subscription,
};
use uuid::Uuid;

use super::row::SubscriptionRow;
use crate::{
    PgStore,
    error::db_error,
    schema::webhook_subscriptions,
    spanning::{Spanning, across_customers},
};

type SealedColumns = (String, Vec<u8>, Vec<u8>);

fn sealed((key_id, nonce, ciphertext): SealedColumns) -> SealedSecret {
    SealedSecret {
        key_id,
        nonce,
        ciphertext,
    }
}

/// What a rotation found that stops it.
enum Refused {
    Gone,
    Changed(i32),
    Overlapping(DateTime<Utc>),
}

impl PgStore {
    pub(super) async fn secrets_of(
        &self,
        scope: CustomerScope,
        id: WebhookId,
    ) -> Result<SubscriptionSecrets> {
        let mut conn = self.conn().await?;
        let (current, key_id, nonce, ciphertext, expires) = webhook_subscriptions::table
            .find((scope.customer_id().as_uuid(), id.as_uuid()))
            .filter(webhook_subscriptions::active)
            .select((
                (
                    webhook_subscriptions::secret_key_id,
                    webhook_subscriptions::secret_nonce,
                    webhook_subscriptions::secret_ciphertext,
                ),
                webhook_subscriptions::previous_secret_key_id,
                webhook_subscriptions::previous_secret_nonce,
                webhook_subscriptions::previous_secret_ciphertext,
                webhook_subscriptions::previous_secret_expires_at,
            ))
            .get_result::<(
                SealedColumns,
                Option<String>,
                Option<Vec<u8>>,
                Option<Vec<u8>>,
                Option<DateTime<Utc>>,
            )>(&mut conn)
            .await
            .map_err(db_error)?;
        let previous = match (key_id, nonce, ciphertext, expires) {
            (Some(key_id), Some(nonce), Some(ciphertext), Some(at)) if at > self.clock.now() => {
                Some(sealed((key_id, nonce, ciphertext)))
            }
            _ => None,
        };
        Ok(SubscriptionSecrets {
            current: sealed(current),
            previous,
        })
    }

    pub(super) async fn replace_secret(
        &self,
        scope: CustomerScope,
        id: WebhookId,
        secret: &SealedSecret,
        previous_expires_at: Option<DateTime<Utc>>,
        force: bool,
        expected: Option<&[u32]>,
    ) -> Result<Subscription> {
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        let outcome = conn
            .transaction(async |conn| {
                let found: Option<(i32, Option<DateTime<Utc>>)> = webhook_subscriptions::table
                    .find((customer, id.as_uuid()))
                    .filter(webhook_subscriptions::active)
                    .select((
                        webhook_subscriptions::version,
                        webhook_subscriptions::previous_secret_expires_at,
                    ))
                    .for_update()
                    .first(conn)
                    .await
                    .optional()?;
                let Some((version, overlap)) = found else {
                    return Ok(Err(Refused::Gone));
                };
                if expected.is_some_and(|accepted| {
                    !accepted.iter().any(|v| i64::from(*v) == i64::from(version))
                }) {
                    return Ok(Err(Refused::Changed(version)));
                }
                if let Some(until) = overlap.filter(|until| *until > self.clock.now() && !force) {
                    return Ok(Err(Refused::Overlapping(until)));
                }
                // The current secret becomes the previous one (or is dropped at once).
                let row: SubscriptionRow = diesel::sql_query(
                    "UPDATE webhook_subscriptions SET \
                        previous_secret_key_id = CASE WHEN $6 THEN secret_key_id END, \
                        previous_secret_nonce = CASE WHEN $6 THEN secret_nonce END, \
                        previous_secret_ciphertext = CASE WHEN $6 THEN secret_ciphertext END, \
                        previous_secret_expires_at = $7, \
                        secret_key_id = $3, secret_nonce = $4, secret_ciphertext = $5, \
                        version = version + 1 \
                     WHERE customer_id = $1 AND id = $2 \
                     RETURNING id, name, webhook_url, webhook_type, event_types, active, \
                               created_at, deactivated_at, paused_at, disabled_at, \
                               disabled_reason, previous_secret_expires_at, version",
                )
                .bind::<SqlUuid, _>(customer)
                .bind::<SqlUuid, _>(id.as_uuid())
                .bind::<Text, _>(&secret.key_id)
                .bind::<Bytea, _>(&secret.nonce)
                .bind::<Bytea, _>(&secret.ciphertext)
                .bind::<Bool, _>(previous_expires_at.is_some())
                .bind::<Nullable<Timestamptz>, _>(previous_expires_at)
                .get_result(conn)
                .await?;
                crate::data_versions::notify_data_changed(conn, &[customer]).await?;
                Ok::<_, diesel::result::Error>(Ok(row))
            })
            .await
            .map_err(db_error)?;
        match outcome {
            Ok(row) => row.try_into(),
            Err(Refused::Gone) => Err(Error::NotFound),
            Err(Refused::Changed(version)) => Err(changed(version)),
            Err(Refused::Overlapping(until)) => Err(Error::Conflict(format!(
                "the previous rotation's overlap lasts until {}: pass \"force\": true to \
                 replace the secret anyway (the older secret then stops signing at once)",
                until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ))),
        }
    }
}

/// The error of an `If-Match` that no longer holds.
pub(super) fn changed(version: i32) -> Error {
    Error::PreconditionFailed(format!(
        "the subscription changed since that ETag was read (it is now \"v{version}\"): read \
         it again"
    ))
}

/// Sets `bind` for the previous or current columns.
macro_rules! secret_columns {
    ($previous:expr) => {
        if $previous {
            (
                "previous_secret_key_id",
                "previous_secret_nonce",
                "previous_secret_ciphertext",
            )
        } else {
            ("secret_key_id", "secret_nonce", "secret_ciphertext")
        }
    };
}

#[derive(QueryableByName)]
struct StoredRow {
    #[diesel(sql_type = SqlUuid)]
    customer_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    key_id: String,
    #[diesel(sql_type = Bytea)]
    nonce: Vec<u8>,
    #[diesel(sql_type = Bytea)]
    ciphertext: Vec<u8>,
}

#[async_trait]
impl SecretRotationRepository for PgStore {
    async fn secrets_sealed_with_other_keys(
        &self,
        current_key_id: &str,
        previous: bool,
        after: Option<(CustomerId, WebhookId)>,
        limit: u32,
    ) -> Result<Vec<StoredSecret>> {
        let (key_id, nonce, ciphertext) = secret_columns!(previous);
        let (after_customer, after_id) = after
            .map(|(c, i)| (Some(c.as_uuid()), Some(i.as_uuid())))
            .unwrap_or_default();
        let mut conn = self.conn().await?;
        let statement = format!(
            "SELECT customer_id, id, {key_id} AS key_id, {nonce} AS nonce, \
                    {ciphertext} AS ciphertext \
             FROM webhook_subscriptions \
             WHERE {key_id} IS NOT NULL AND {key_id} <> $1 \
               AND ($2::uuid IS NULL OR (customer_id, id) > ($2, $3)) \
             ORDER BY customer_id, id LIMIT $4"
        );
        let rows: Vec<StoredRow> = across_customers(&mut conn, Spanning::Reseal, |conn| {
            Box::pin(
                diesel::sql_query(statement)
                    .bind::<Text, _>(current_key_id)
                    .bind::<Nullable<SqlUuid>, _>(after_customer)
                    .bind::<Nullable<SqlUuid>, _>(after_id)
                    .bind::<Integer, _>(i32::try_from(limit).unwrap_or(i32::MAX))
                    .load(conn),
            )
        })
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(|row| StoredSecret {
                customer: CustomerId::from_uuid(row.customer_id),
                subscription: WebhookId::from_uuid(row.id),
                previous,
                sealed: SealedSecret {
                    key_id: row.key_id,
                    nonce: row.nonce,
                    ciphertext: row.ciphertext,
                },
            })
            .collect())
    }

    async fn replace_sealed_secret(
        &self,
        previous: &StoredSecret,
        resealed: &SealedSecret,
    ) -> Result<bool> {
        let (key_id, nonce, ciphertext) = secret_columns!(previous.previous);
        let old = &previous.sealed;
        let mut conn = self.conn().await?;
        let updated = diesel::sql_query(format!(
            "UPDATE webhook_subscriptions SET {key_id} = $6, {nonce} = $7, {ciphertext} = $8 \
             WHERE customer_id = $1 AND id = $2 \
               AND {key_id} = $3 AND {nonce} = $4 AND {ciphertext} = $5"
        ))
        .bind::<SqlUuid, _>(previous.customer.as_uuid())
        .bind::<SqlUuid, _>(previous.subscription.as_uuid())
        .bind::<Text, _>(&old.key_id)
        .bind::<Bytea, _>(&old.nonce)
        .bind::<Bytea, _>(&old.ciphertext)
        .bind::<Text, _>(&resealed.key_id)
        .bind::<Bytea, _>(&resealed.nonce)
        .bind::<Bytea, _>(&resealed.ciphertext)
        .execute(&mut conn)
        .await
        .map_err(db_error)?;
        Ok(updated == 1)
    }
}
