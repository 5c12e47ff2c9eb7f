//! Finding the principal a key or an access token presents: through the key cache, or at
//! the store, with the customer's inactivity rule.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use posture_domain::{
    CustomerId, Error, KeyHash, KeyId, Principal, Result,
    audit::AuditAction,
    credential::{inactive_at, inactive_reason},
    oauth::TokenClaims,
    ports::KnownKey,
};
use uuid::Uuid;

use super::rows::{allow_list, scope_set};
use crate::{
    PgStore,
    error::{corrupt, db_error},
    schema::{api_keys, customers},
    store::Hourly,
};

impl PgStore {
    /// The principal presented as `hash`: from the key cache, or `find` (its principal and
    /// when it stops being valid) at the store, remembered either way; its use recorded.
    pub(super) async fn cached_principal<F, Fut>(
        &self,
        hash: &KeyHash,
        find: F,
    ) -> Result<Option<Principal>>
    where
        F: FnOnce(DateTime<Utc>) -> Fut,
        Fut: std::future::Future<Output = Result<Option<(Principal, Option<DateTime<Utc>>)>>>,
    {
        let now = self.clock.now();
        let principal = match self.key_cache.known(hash, now) {
            KnownKey::Valid(principal) => principal,
            KnownKey::Unknown => return Ok(None),
            KnownKey::Unseen | KnownKey::Recent => {
                let generation = self.key_cache.generation();
                self.key_cache.count_miss();
                let Some((principal, expires_at)) = find(now).await? else {
                    self.key_cache.insert_unknown(hash, generation);
                    return Ok(None);
                };
                self.key_cache
                    .insert(*hash, principal.clone(), expires_at, generation);
                principal
            }
        };
        Ok(Some(principal))
    }
}

/// `(id, customer_id, key_hash, scopes, expires_at, allow_from)` of one key.
type KeyRow = (
    Uuid,
    Uuid,
    Option<Vec<u8>>,
    Vec<String>,
    Option<DateTime<Utc>>,
    Vec<String>,
);

impl PgStore {
    /// The principal of the key with this hash and when its cache entry lapses (its expiry,
    /// or when it stops working for inactivity), if it is neither revoked nor expired at
    /// `now`; `CredentialLapsed` when its customer's inactivity rule ended it.
    pub(super) async fn find_valid_key(
        &self,
        hash: &KeyHash,
        now: DateTime<Utc>,
    ) -> Result<Option<(Principal, Option<DateTime<Utc>>)>> {
        let mut conn = self.conn().await?;
        let found: Option<(KeyRow, Usage)> = api_keys::table
            .inner_join(customers::table.on(customers::id.eq(api_keys::customer_id)))
            .filter(api_keys::key_hash.eq(hash.as_bytes().as_slice()))
            .filter(api_keys::revoked_at.is_null())
            .filter(
                api_keys::expires_at
                    .is_null()
                    .or(api_keys::expires_at.gt(now)),
            )
            .select((
                (
                    api_keys::id,
                    api_keys::customer_id,
                    api_keys::key_hash,
                    api_keys::scopes,
                    api_keys::expires_at,
                    api_keys::allow_from,
                ),
                USAGE,
            ))
            .first(&mut conn)
            .await
            .optional()
            .map_err(db_error)?;
        let Some(((id, customer, stored_hash, scopes, expires_at, allow_from), usage)) = found
        else {
            return Ok(None);
        };
        // The lookup matched by index; compare again in constant time all the same.
        let stored: [u8; 32] = stored_hash
            .ok_or_else(|| corrupt("key hash", "missing"))?
            .try_into()
            .map_err(|_| corrupt("key hash", "length"))?;
        if KeyHash(stored) != *hash {
            return Ok(None);
        }
        let principal = Principal::verified(
            KeyId::from_uuid(id),
            CustomerId::from_uuid(customer),
            scope_set(&scopes)?,
        )
        .allowed_from(allow_list(&allow_from)?);
        let lapses = self.check_activity(&principal, usage, now, false)?;
        Ok(Some((principal, earliest(expires_at, lapses))))
    }

    /// Writes the refusal of `principal`'s lapsed credential to the audit log, once an hour
    /// per process (and once an hour over every instance: the line's id is the hour's).
    pub(super) fn note_lapsed(&self, principal: &Principal, now: DateTime<Utc>) {
        if self
            .key_touches
            .first_of_hour(Hourly::Lapsed, principal.key_id(), now)
        {
            let store = self.clone();
            let principal = principal.clone();
            tokio::spawn(async move {
                store
                    .write_aggregated(
                        &principal,
                        None,
                        now,
                        (
                            AuditAction::KeyExpiredInactive,
                            AuditAction::ClientExpiredInactive,
                        ),
                        None,
                        "refused: unused longer than the customer allows".to_owned(),
                    )
                    .await;
            });
        }
    }

    /// When `principal`'s credential stops working for inactivity (`None`: never), or the
    /// refusal once it has (recorded in the audit log once an hour).
    pub(super) fn check_activity(
        &self,
        principal: &Principal,
        (last_used_at, created_at, days): Usage,
        now: DateTime<Utc>,
        client: bool,
    ) -> Result<Option<DateTime<Utc>>> {
        let days = days.and_then(|d| u32::try_from(d).ok());
        let lapses = inactive_at(last_used_at.unwrap_or(created_at), days);
        match (lapses, days) {
            (Some(at), Some(days)) if at <= now => {
                self.note_lapsed(principal, now);
                Err(Error::CredentialLapsed(inactive_reason(client, days)))
            }
            _ => Ok(lapses),
        }
    }

    /// The principal of a token's client, if the client is neither revoked nor expired at
    /// `now`: the scopes both hold, and the client's expiry.
    pub(super) async fn find_valid_client(
        &self,
        claims: &TokenClaims,
        now: DateTime<Utc>,
    ) -> Result<Option<(Principal, Option<DateTime<Utc>>)>> {
        let mut conn = self.conn().await?;
        let found: Option<(ClientRow, Usage)> = api_keys::table
            .inner_join(customers::table.on(customers::id.eq(api_keys::customer_id)))
            .filter(api_keys::id.eq(claims.client.as_uuid()))
            .filter(api_keys::kind.eq("client"))
            .filter(api_keys::revoked_at.is_null())
            .filter(
                api_keys::expires_at
                    .is_null()
                    .or(api_keys::expires_at.gt(now)),
            )
            .select((
                (
                    api_keys::customer_id,
                    api_keys::scopes,
                    api_keys::expires_at,
                    api_keys::allow_from,
                ),
                USAGE,
            ))
            .first(&mut conn)
            .await
            .optional()
            .map_err(db_error)?;
        let Some(((customer, scopes, expires_at, allow_from), usage)) = found else {
            return Ok(None);
        };
        let scopes = claims.scopes.intersection(scope_set(&scopes)?);
        if scopes.is_empty() {
            return Ok(None);
        }
        let principal = Principal::verified(claims.client, CustomerId::from_uuid(customer), scopes)
            .allowed_from(allow_list(&allow_from)?);
        let lapses = self.check_activity(&principal, usage, now, true)?;
        // Cached until the client expires (or lapses for inactivity): the entry serves every
        // token of the client with these scopes, each of whose own expiry is checked before
        // the cache is asked.
        Ok(Some((principal, earliest(expires_at, lapses))))
    }
}

/// `(last_used_at, created_at, the customer's inactivity_days)` of a credential.
type Usage = (Option<DateTime<Utc>>, DateTime<Utc>, Option<i32>);

/// The columns of a [`Usage`].
const USAGE: (
    api_keys::last_used_at,
    api_keys::created_at,
    customers::inactivity_days,
) = (
    api_keys::last_used_at,
    api_keys::created_at,
    customers::inactivity_days,
);

/// The earlier of two optional times (`None`: never).
fn earliest(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `(customer_id, scopes, expires_at, allow_from)` of a client.
type ClientRow = (Uuid, Vec<String>, Option<DateTime<Utc>>, Vec<String>);
