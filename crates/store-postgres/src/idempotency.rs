//! Idempotency keys in PostgreSQL: one row per (customer, API key, key), claimed by an
//! upsert that takes a forgotten key or one whose first request stopped, so two instances
//! never both run a request for one key.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::{
    OptionalExtension as _, QueryableByName,
    pg::Pg,
    query_builder::{BoxedSqlQuery, SqlQuery},
    sql_types::{
        BigInt, Bytea, Double, Jsonb, Nullable, SmallInt, Text, Timestamptz, Uuid as SqlUuid,
    },
};
use diesel_async::RunQueryDsl;
use posture_domain::{
    CustomerScope, Error, KeyId, Result,
    idempotency::{
        Claim, ClaimId, Fingerprint, IN_PROGRESS_SECS, IdempotencyKey, RETENTION_HOURS,
        StoredAnswer,
    },
    ports::IdempotencyRepository,
    secrets::SealedSecret,
};
use uuid::Uuid;

use crate::{PgStore, error::db_error, sweeps::customer_ids};

#[derive(QueryableByName)]
struct DbNow {
    #[diesel(sql_type = Timestamptz)]
    now: DateTime<Utc>,
}

#[derive(QueryableByName)]
struct Claimed {
    #[diesel(sql_type = SqlUuid)]
    claim: Uuid,
}

#[derive(QueryableByName)]
struct Kept {
    #[diesel(sql_type = Bytea)]
    fingerprint: Vec<u8>,
    #[diesel(sql_type = Nullable<SmallInt>)]
    status: Option<i16>,
    #[diesel(sql_type = Nullable<Jsonb>)]
    headers: Option<serde_json::Value>,
    #[diesel(sql_type = Nullable<Text>)]
    body_key_id: Option<String>,
    #[diesel(sql_type = Nullable<Bytea>)]
    body_nonce: Option<Vec<u8>>,
    #[diesel(sql_type = Nullable<Bytea>)]
    body: Option<Vec<u8>>,
}

impl Kept {
    /// What the first request left, as seen by a request with `fingerprint`.
    fn claim(self, fingerprint: &Fingerprint) -> Result<Claim> {
        if self.fingerprint != fingerprint.0 {
            return Ok(Claim::OtherRequest);
        }
        let (Some(status), Some(key_id), Some(nonce), Some(ciphertext)) =
            (self.status, self.body_key_id, self.body_nonce, self.body)
        else {
            return Ok(Claim::InProgress);
        };
        let headers: Vec<(String, String)> =
            serde_json::from_value(self.headers.unwrap_or_default())
                .map_err(|e| Error::internal(format!("a kept answer's headers: {e}")))?;
        Ok(Claim::Replay(StoredAnswer {
            status: u16::try_from(status).map_err(|_| Error::internal("a kept answer's status"))?,
            headers,
            body: SealedSecret {
                key_id,
                nonce,
                ciphertext,
            },
        }))
    }
}

/// `statement` on the key's row while `claim` holds it without an answer (`$1` to `$4`
/// bound to the key and the claim; the statement's own parameters follow from `$5`).
fn on_claim<'a>(
    statement: &str,
    (scope, by, key, claim): (CustomerScope, KeyId, &'a IdempotencyKey, ClaimId),
) -> BoxedSqlQuery<'a, Pg, SqlQuery> {
    diesel::sql_query(format!(
        "{statement} WHERE customer_id = $1 AND api_key_id = $2 AND idempotency_key = $3 \
                       AND claim = $4 AND status IS NULL"
    ))
    .into_boxed()
    .bind::<SqlUuid, _>(scope.customer_id().as_uuid())
    .bind::<SqlUuid, _>(by.as_uuid())
    .bind::<Text, _>(key.as_str())
    .bind::<SqlUuid, _>(claim.0)
}

#[async_trait]
impl IdempotencyRepository for PgStore {
    async fn claim_idempotency_key(
        &self,
        scope: CustomerScope,
        by: KeyId,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim> {
        let mut conn = self.conn().await?;
        let customer = scope.customer_id().as_uuid();
        let claim = ClaimId::new();
        // The database's time, not the instance's: instances whose clocks differ agree on
        // when a hold ends. (Read first, not written as `now()` into the statement: Citus
        // refuses a function that is not immutable in an `ON CONFLICT`'s `WHERE`.)
        let now: DbNow = diesel::sql_query("SELECT now() AS now")
            .get_result(&mut conn)
            .await
            .map_err(db_error)?;
        let now = now.now;
        // Taken when unused, forgotten, or held past its time by a request that stopped.
        let claimed: Option<Claimed> = diesel::sql_query(
            "INSERT INTO idempotency_keys AS k (customer_id, api_key_id, idempotency_key, \
                                                fingerprint, claim, running_until, kept_until) \
             VALUES ($1, $2, $3, $4, $8, $5, $6) \
             ON CONFLICT (customer_id, api_key_id, idempotency_key) DO UPDATE \
                 SET fingerprint = EXCLUDED.fingerprint, claim = EXCLUDED.claim, \
                     running_until = EXCLUDED.running_until, \
                     kept_until = EXCLUDED.kept_until, status = NULL, headers = NULL, \
                     body_key_id = NULL, body_nonce = NULL, body = NULL \
                 WHERE k.kept_until <= $7 OR (k.status IS NULL AND k.running_until <= $7) \
             RETURNING k.claim",
        )
        .bind::<SqlUuid, _>(customer)
        .bind::<SqlUuid, _>(by.as_uuid())
        .bind::<Text, _>(key.as_str())
        .bind::<Bytea, _>(fingerprint.0.as_slice())
        .bind::<Timestamptz, _>(now + chrono::Duration::seconds(IN_PROGRESS_SECS))
        .bind::<Timestamptz, _>(now + chrono::Duration::hours(RETENTION_HOURS))
        .bind::<Timestamptz, _>(now)
        .bind::<SqlUuid, _>(claim.0)
        .get_result(&mut conn)
        .await
        .optional()
        .map_err(db_error)?;
        if claimed.is_some_and(|c| c.claim == claim.0) {
            return Ok(Claim::Run(claim));
        }
        let kept: Option<Kept> = diesel::sql_query(
            "SELECT fingerprint, status, headers, body_key_id, body_nonce, body \
             FROM idempotency_keys \
             WHERE customer_id = $1 AND api_key_id = $2 AND idempotency_key = $3",
        )
        .bind::<SqlUuid, _>(customer)
        .bind::<SqlUuid, _>(by.as_uuid())
        .bind::<Text, _>(key.as_str())
        .get_result(&mut conn)
        .await
        .optional()
        .map_err(db_error)?;
        match kept {
            Some(kept) => kept.claim(fingerprint),
            // Forgotten between the two statements: as in progress, the retry's retry runs.
            None => Ok(Claim::InProgress),
        }
    }

    async fn keep_idempotent_answer(
        &self,
        scope: CustomerScope,
        by: KeyId,
        key: &IdempotencyKey,
        claim: ClaimId,
        answer: &StoredAnswer,
    ) -> Result<()> {
        let mut conn = self.conn().await?;
        let headers = serde_json::to_value(&answer.headers)
            .map_err(|e| Error::internal(format!("an answer's headers: {e}")))?;
        on_claim(
            "UPDATE idempotency_keys SET status = $5, headers = $6, body_key_id = $7, \
                                         body_nonce = $8, body = $9, running_until = NULL",
            (scope, by, key, claim),
        )
        .bind::<SmallInt, _>(i16::try_from(answer.status).unwrap_or(i16::MAX))
        .bind::<Jsonb, _>(headers)
        .bind::<Text, _>(answer.body.key_id.as_str())
        .bind::<Bytea, _>(answer.body.nonce.as_slice())
        .bind::<Bytea, _>(answer.body.ciphertext.as_slice())
        .execute(&mut conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn extend_idempotency_hold(
        &self,
        scope: CustomerScope,
        by: KeyId,
        key: &IdempotencyKey,
        claim: ClaimId,
    ) -> Result<()> {
        let mut conn = self.conn().await?;
        on_claim(
            "UPDATE idempotency_keys SET running_until = now() + make_interval(secs => $5)",
            (scope, by, key, claim),
        )
        .bind::<Double, _>(IN_PROGRESS_SECS as f64)
        .execute(&mut conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn release_idempotency_key(
        &self,
        scope: CustomerScope,
        by: KeyId,
        key: &IdempotencyKey,
        claim: ClaimId,
    ) -> Result<()> {
        let mut conn = self.conn().await?;
        on_claim("DELETE FROM idempotency_keys", (scope, by, key, claim))
            .execute(&mut conn)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn purge_idempotency_keys(&self, cutoff: DateTime<Utc>, batch: u32) -> Result<u64> {
        let mut conn = self.conn().await?;
        // Customer by customer along (customer_id, kept_until): on Citus a statement that
        // stops at a `LIMIT` must reach one customer's shard, and a customer with nothing
        // to forget costs one index probe.
        let customers = customer_ids(&mut conn).await.map_err(db_error)?;
        let mut deleted = 0_u64;
        for customer_id in customers {
            let left = u64::from(batch).saturating_sub(deleted);
            if left == 0 {
                break;
            }
            deleted += diesel::sql_query(
                "DELETE FROM idempotency_keys k USING ( \
                     SELECT api_key_id, idempotency_key FROM idempotency_keys \
                     WHERE customer_id = $3 AND kept_until < $1 \
                     ORDER BY kept_until LIMIT $2) old \
                 WHERE k.customer_id = $3 AND k.api_key_id = old.api_key_id \
                   AND k.idempotency_key = old.idempotency_key AND k.kept_until < $1",
            )
            .bind::<Timestamptz, _>(cutoff)
            .bind::<BigInt, _>(i64::try_from(left).unwrap_or(i64::MAX))
            .bind::<SqlUuid, _>(customer_id)
            .execute(&mut conn)
            .await
            .map_err(db_error)? as u64;
        }
        Ok(deleted)
    }
}
