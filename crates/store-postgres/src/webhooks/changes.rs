//! Changing a subscription: a consumer's patch (pause, resume, edit), and what the worker
//! does on its own — disabling subscriptions that only fail, cancelling what a pause held
//! too long, forgetting secrets whose overlap ended.

use chrono::{DateTime, Utc};
use diesel::{
    prelude::*,
    sql_types::{Array, Bool, Nullable, Text, Timestamptz, Uuid as SqlUuid},
};
use diesel_async::{AsyncConnection, RunQueryDsl};
use posture_domain::{
    CustomerId, CustomerScope, Error, Result, WebhookId, webhook::Subscription,
    webhook_change::SubscriptionPatch,
};
use uuid::Uuid;

use super::{row::SubscriptionRow, secrets::changed};
use crate::{
    PgStore,
    error::db_error,
    schema::webhook_subscriptions,
    spanning::{Spanning, across_customers},
};

/// The columns of a [`SubscriptionRow`], for `RETURNING`.
pub(super) const RETURNED: &str = "id, name, webhook_url, webhook_type, event_types, active, \
     created_at, deactivated_at, paused_at, disabled_at, disabled_reason, \
     previous_secret_expires_at, version";

impl PgStore {
    pub(super) async fn apply_patch(
        &self,
        scope: CustomerScope,
        id: WebhookId,
        patch: &SubscriptionPatch,
        expected: Option<&[u32]>,
    ) -> Result<Subscription> {
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        let outcome = conn
            .transaction(async |conn| {
                let found: Option<i32> = webhook_subscriptions::table
                    .find((customer, id.as_uuid()))
                    .filter(webhook_subscriptions::active)
                    .select(webhook_subscriptions::version)
                    .for_update()
                    .first(conn)
                    .await
                    .optional()?;
                let Some(version) = found else {
                    return Ok(Err(Error::NotFound));
                };
                if expected.is_some_and(|accepted| {
                    !accepted.iter().any(|v| i64::from(*v) == i64::from(version))
                }) {
                    return Ok(Err(changed(version)));
                }
                // `active`: false pauses (a disabled subscription stays disabled), true
                // resumes or re-enables and starts counting failures afresh.
                let row: SubscriptionRow = diesel::sql_query(format!(
                    "UPDATE webhook_subscriptions SET \
                        name = COALESCE($3, name), \
                        webhook_url = COALESCE($4, webhook_url), \
                        event_types = COALESCE($5, event_types), \
                        paused_at = CASE WHEN $6 IS NULL THEN paused_at WHEN $6 THEN NULL \
                                         WHEN disabled_at IS NULL THEN COALESCE(paused_at, $7) \
                                         ELSE paused_at END, \
                        disabled_at = CASE WHEN $6 THEN NULL ELSE disabled_at END, \
                        disabled_reason = CASE WHEN $6 THEN NULL ELSE disabled_reason END, \
                        failing_since = CASE WHEN $6 THEN NULL ELSE failing_since END \
                     WHERE customer_id = $1 AND id = $2 RETURNING {RETURNED}"
                ))
                .bind::<SqlUuid, _>(customer)
                .bind::<SqlUuid, _>(id.as_uuid())
                .bind::<Nullable<Text>, _>(&patch.name)
                .bind::<Nullable<Text>, _>(&patch.webhook_url)
                .bind::<Nullable<Array<Text>>, _>(
                    patch
                        .event_types
                        .as_ref()
                        .map(|types| types.iter().map(|e| e.as_str()).collect::<Vec<_>>()),
                )
                .bind::<Nullable<Bool>, _>(patch.active)
                // The time from the store's clock: Citus evaluates no function but immutable
                // ones inside a CASE of an UPDATE.
                .bind::<Timestamptz, _>(self.clock.now())
                .get_result(conn)
                .await?;
                if patch.active == Some(true) {
                    // Held deliveries are due: wake the workers when this commits.
                    crate::wake::notify_workers(conn).await?;
                }
                crate::data_versions::notify_data_changed(conn, &[customer]).await?;
                Ok::<_, diesel::result::Error>(Ok(row))
            })
            .await
            .map_err(db_error)?;
        outcome?.try_into()
    }
}

#[derive(QueryableByName)]
struct Disabled {
    #[diesel(sql_type = SqlUuid)]
    customer_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
}

/// Disables the subscriptions failing since before `failing_before` and cancels their
/// pending deliveries (one statement: a pass's fan-out sees either the old or the new
/// state, and fans out nothing to a disabled subscription).
pub(crate) async fn disable_failing(
    store: &PgStore,
    failing_before: DateTime<Utc>,
) -> Result<Vec<(CustomerId, WebhookId)>> {
    let mut conn = store.conn().await?;
    let rows: Vec<Disabled> = across_customers(&mut conn, Spanning::DisableFailing, |conn| {
        Box::pin(async move {
            let rows: Vec<Disabled> = diesel::sql_query(
                "WITH disabled AS ( \
                     UPDATE webhook_subscriptions \
                        SET disabled_at = now(), disabled_reason = 'failing' \
                     WHERE active AND disabled_at IS NULL AND paused_at IS NULL \
                       AND failing_since < $1 \
                     RETURNING customer_id, id), \
                 cancelled AS ( \
                     UPDATE webhook_deliveries d SET status = 'cancelled', lease_until = NULL, \
                            leased_by = NULL \
                     FROM disabled \
                     WHERE d.customer_id = disabled.customer_id \
                       AND d.subscription_id = disabled.id AND d.status = 'pending') \
                 SELECT customer_id, id FROM disabled",
            )
            .bind::<Timestamptz, _>(failing_before)
            .load(conn)
            .await?;
            let customers: Vec<Uuid> = rows.iter().map(|r| r.customer_id).collect();
            crate::data_versions::notify_data_changed(conn, &customers).await?;
            Ok(rows)
        })
    })
    .await
    .map_err(db_error)?;
    Ok(rows
        .into_iter()
        .map(|r| {
            (
                CustomerId::from_uuid(r.customer_id),
                WebhookId::from_uuid(r.id),
            )
        })
        .collect())
}

/// Cancels what paused subscriptions have held since before `held_before`, and forgets the
/// previous secrets whose overlap ended.
pub(crate) async fn expire_holds_and_secrets(
    store: &PgStore,
    held_before: DateTime<Utc>,
) -> Result<(u64, u64)> {
    let mut conn = store.conn().await?;
    across_customers(&mut conn, Spanning::ExpireHolds, |conn| {
        Box::pin(async move {
            let cancelled = diesel::sql_query(
                "UPDATE webhook_deliveries d SET status = 'cancelled', \
                        last_error = 'held too long while the subscription was paused' \
                 FROM webhook_subscriptions s \
                 WHERE s.customer_id = d.customer_id AND s.id = d.subscription_id \
                   AND s.paused_at IS NOT NULL AND d.status = 'pending' \
                   AND greatest(d.created_at, s.paused_at) < $1",
            )
            .bind::<Timestamptz, _>(held_before)
            .execute(conn)
            .await?;
            let forgotten: Vec<Disabled> = diesel::sql_query(
                "UPDATE webhook_subscriptions SET previous_secret_key_id = NULL, \
                        previous_secret_nonce = NULL, previous_secret_ciphertext = NULL, \
                        previous_secret_expires_at = NULL \
                 WHERE previous_secret_expires_at <= now() \
                 RETURNING customer_id, id",
            )
            .load(conn)
            .await?;
            let customers: Vec<Uuid> = forgotten.iter().map(|r| r.customer_id).collect();
            crate::data_versions::notify_data_changed(conn, &customers).await?;
            Ok((cancelled as u64, forgotten.len() as u64))
        })
    })
    .await
    .map_err(db_error)
}
