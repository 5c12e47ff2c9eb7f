//! API keys: issue, list, revoke and authenticate.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::{
    prelude::*,
    sql_types::{Bool, Nullable, Timestamptz},
};
use diesel_async::{AsyncConnection as _, RunQueryDsl};
use std::net::IpAddr;

use posture_domain::{
    ApiKey, CustomerId, CustomerScope, Error, KeyHash, KeyId, Principal, Result, Scope,
    allow_list::AllowList,
    api_key::{CurrentKey, NewApiKey},
    audit::AuditAction,
    console::Actor,
    credential::CredentialUse,
    oauth::TokenClaims,
    ports::{ApiKeyRepository, KnownKey},
};
use uuid::Uuid;

mod lookup;
mod rows;
mod uses;

pub(crate) use rows::{ApiKeyRow, allow_list, scope_set};
pub(crate) use uses::{NamedKey, audit, credential_line};

use crate::{
    PgStore,
    error::{db_error, is_foreign_key_violation, is_unique_violation},
    schema::{api_keys, customers},
    store::Hourly,
};

/// `api_keys.kind` of a key (the other kind is an OAuth client, `clients.rs`).
const KEY: &str = "key";

#[derive(Insertable)]
#[diesel(table_name = api_keys)]
struct NewApiKeyRow<'a> {
    id: Uuid,
    customer_id: Uuid,
    name: &'a str,
    prefix: &'a str,
    key_hash: Option<&'a [u8]>,
    scopes: Vec<&'static str>,
    expires_at: Option<DateTime<Utc>>,
    created_by: &'a str,
    allow_from: Vec<String>,
}

/// PostgreSQL's `now()`: the transaction's time, as a nullable column's value.
pub(crate) fn db_now() -> diesel::expression::SqlLiteral<Nullable<Timestamptz>> {
    diesel::dsl::sql::<Nullable<Timestamptz>>("now()")
}

#[async_trait]
impl ApiKeyRepository for PgStore {
    async fn insert_key(&self, key: NewApiKey, by: &Actor) -> Result<ApiKey> {
        let owner = key.customer_id;
        let row = NewApiKeyRow {
            id: key.id.as_uuid(),
            customer_id: key.customer_id.as_uuid(),
            name: &key.name,
            prefix: &key.prefix,
            key_hash: Some(key.hash.as_bytes()),
            scopes: key.scopes.iter().map(Scope::as_str).collect(),
            expires_at: key.expires_at,
            created_by: by.name(),
            allow_from: key.allow_from.to_strings(),
        };
        let max = self.max_active_keys;
        let mut conn = self.conn().await?;
        let inserted = conn
            .transaction(async |conn| {
                // The customer's row serialises issuing, so two admins cannot both take the
                // last place.
                let customer: Option<Uuid> = customers::table
                    .find(row.customer_id)
                    .select(customers::id)
                    .for_update()
                    .first(conn)
                    .await
                    .optional()?;
                if customer.is_none() {
                    return Ok(Err(Error::NotFound));
                }
                if let Some(refused) = over_active_limit(conn, owner, max).await? {
                    return Ok(Err(refused));
                }
                let key = diesel::insert_into(api_keys::table)
                    .values(&row)
                    .returning(ApiKeyRow::as_returning())
                    .get_result::<ApiKeyRow>(conn)
                    .await?;
                audit(conn, &key, "key.issued", by).await?;
                Ok::<_, diesel::result::Error>(Ok(key))
            })
            .await;
        match inserted {
            Ok(Ok(row)) => row.try_into(),
            Ok(Err(refused)) => Err(refused),
            Err(e) if is_foreign_key_violation(&e) => Err(Error::NotFound),
            // The key's id is taken: the same issue form sent twice (the console's id is the
            // form's one-time token).
            Err(e) if is_unique_violation(&e) => Err(Error::Conflict(
                "this form was already used: fill it in again".to_owned(),
            )),
            Err(e) => Err(db_error(e)),
        }
    }

    async fn list_keys(&self, scope: CustomerScope) -> Result<Vec<ApiKey>> {
        let mut conn = self.conn().await?;
        let rows: Vec<ApiKeyRow> = api_keys::table
            .filter(api_keys::customer_id.eq(scope.customer_id().as_uuid()))
            .filter(api_keys::kind.eq(KEY))
            .order((api_keys::created_at, api_keys::id))
            .select(ApiKeyRow::as_select())
            .load(&mut conn)
            .await
            .map_err(db_error)?;
        rows.into_iter().map(ApiKey::try_from).collect()
    }

    async fn list_keys_page(
        &self,
        scope: CustomerScope,
        before: Option<KeyId>,
        limit: u32,
    ) -> Result<Vec<ApiKey>> {
        let customer = scope.customer_id().as_uuid();
        let mut conn = self.conn().await?;
        let mut query = api_keys::table
            .filter(api_keys::customer_id.eq(customer))
            .filter(api_keys::kind.eq(KEY))
            .order((api_keys::created_at.desc(), api_keys::id.desc()))
            .limit(i64::from(limit))
            .select(ApiKeyRow::as_select())
            .into_boxed();
        if let Some(before) = before {
            let (created_at, id): (DateTime<Utc>, Uuid) = api_keys::table
                .filter(api_keys::customer_id.eq(customer))
                .filter(api_keys::id.eq(before.as_uuid()))
                .select((api_keys::created_at, api_keys::id))
                .first(&mut conn)
                .await
                .optional()
                .map_err(db_error)?
                .ok_or(Error::NotFound)?;
            query = query.filter(
                api_keys::created_at
                    .lt(created_at)
                    .or(api_keys::created_at.eq(created_at).and(api_keys::id.lt(id))),
            );
        }
        let rows: Vec<ApiKeyRow> = query.load(&mut conn).await.map_err(db_error)?;
        rows.into_iter().map(ApiKey::try_from).collect()
    }

    async fn current_key(&self, scope: CustomerScope, id: KeyId) -> Result<CurrentKey> {
        let mut conn = self.conn().await?;
        let (row, customer_name): (ApiKeyRow, String) = api_keys::table
            .inner_join(customers::table.on(customers::id.eq(api_keys::customer_id)))
            .filter(api_keys::customer_id.eq(scope.customer_id().as_uuid()))
            .filter(api_keys::id.eq(id.as_uuid()))
            .select((ApiKeyRow::as_select(), customers::name))
            .first(&mut conn)
            .await
            .optional()
            .map_err(db_error)?
            .ok_or(Error::NotFound)?;
        Ok(CurrentKey {
            key: ApiKey::try_from(row)?,
            customer_name,
        })
    }

    async fn revoke_key(
        &self,
        within: Option<CustomerScope>,
        id: KeyId,
        by: &Actor,
    ) -> Result<(ApiKey, bool)> {
        let (row, revoked_now) = self
            .revoke(within, id, KEY, "key.revoked", by)
            .await?
            .ok_or(Error::NotFound)?;
        Ok((row.try_into()?, revoked_now))
    }

    async fn authenticate(&self, hash: &KeyHash) -> Result<Option<Principal>> {
        self.cached_principal(hash, |now| self.find_valid_key(hash, now))
            .await
    }

    async fn authenticate_token(
        &self,
        hash: &KeyHash,
        claims: &TokenClaims,
    ) -> Result<Option<Principal>> {
        if claims.expires_at <= self.clock.now() {
            return Ok(None);
        }
        self.cached_principal(hash, |now| self.find_valid_client(claims, now))
            .await
    }

    fn known_key(&self, hash: &KeyHash) -> KnownKey {
        self.key_cache.known(hash, self.clock.now())
    }

    fn record_use(
        &self,
        principal: &Principal,
        at: DateTime<Utc>,
        from: IpAddr,
        user_agent: Option<&str>,
    ) {
        let from = from.to_canonical();
        if self.record_use && self.key_touches.due(principal.key_id(), from, at) {
            // A bounded number of writes in flight: past it this use is not written.
            let Ok(permit) = self.key_touches.writes.clone().try_acquire_owned() else {
                return;
            };
            let used = CredentialUse::new(at, from, user_agent);
            let store = self.clone();
            let principal = principal.clone();
            tokio::spawn(async move {
                store.touch_key(&principal, used).await;
                drop(permit);
            });
        }
    }

    fn record_refusal(&self, principal: &Principal, from: IpAddr, at: DateTime<Utc>) {
        let from = from.to_canonical();
        if self.key_touches.first_refusal(principal.key_id(), from, at) {
            let store = self.clone();
            let principal = principal.clone();
            tokio::spawn(async move { store.write_refusal(&principal, from, at).await });
        }
    }

    fn record_tokens_issued(&self, principal: &Principal, used: CredentialUse) {
        if self
            .key_touches
            .first_of_hour(Hourly::Tokens, principal.key_id(), used.at)
        {
            let store = self.clone();
            let principal = principal.clone();
            tokio::spawn(async move {
                let detail = "access tokens issued this hour (the first from this address; \
                              one event per client and hour)";
                store
                    .write_aggregated(
                        &principal,
                        Some(used.from),
                        used.at,
                        (
                            AuditAction::ClientTokensIssued,
                            AuditAction::ClientTokensIssued,
                        ),
                        None,
                        detail.to_owned(),
                    )
                    .await;
            });
        }
    }

    fn record_lapsed(&self, principal: &Principal, at: DateTime<Utc>) {
        self.note_lapsed(principal, at);
    }

    async fn set_allow_list(
        &self,
        within: Option<CustomerScope>,
        id: KeyId,
        allow_from: AllowList,
        by: &Actor,
    ) -> Result<ApiKey> {
        let customer = within.map(|scope| scope.customer_id().as_uuid());
        let stored = allow_from.to_strings();
        let mut conn = self.conn().await?;
        let row = conn
            .transaction(async |conn| {
                let current = api_keys::table
                    .filter(api_keys::id.eq(id.as_uuid()))
                    .filter(api_keys::revoked_at.is_null())
                    .filter(
                        api_keys::customer_id
                            .nullable()
                            .eq(customer)
                            .or(customer.is_none().into_sql::<Bool>()),
                    )
                    .for_update()
                    .select(ApiKeyRow::as_select())
                    .first::<ApiKeyRow>(conn)
                    .await
                    .optional()?;
                let Some(current) = current else {
                    return Ok(None);
                };
                if current.allow_from == stored {
                    return Ok::<_, diesel::result::Error>(Some(current));
                }
                let row = diesel::update(api_keys::table.find(id.as_uuid()))
                    .set(api_keys::allow_from.eq(&stored))
                    .returning(ApiKeyRow::as_returning())
                    .get_result::<ApiKeyRow>(conn)
                    .await?;
                let action = AuditAction::for_credential(
                    &row.prefix,
                    AuditAction::KeyAllowListChanged,
                    AuditAction::ClientAllowListChanged,
                );
                let named = NamedKey {
                    id: row.id,
                    customer: row.customer_id,
                    name: &row.name,
                    prefix: &row.prefix,
                };
                let detail = format!(
                    "allowed from {allow_from} (was {})",
                    allow_list_text(&current.allow_from)
                );
                credential_line(
                    conn,
                    Uuid::now_v7(),
                    &named,
                    action.as_str(),
                    by,
                    Some(detail),
                )
                .await?;
                Ok(Some(row))
            })
            .await
            .map_err(db_error)?
            .ok_or(Error::NotFound)?;
        // Other processes hear of it through NOTIFY; this one needs not wait for that.
        self.key_cache.invalidate();
        row.try_into()
    }
}

/// A stored allow-list as the audit log words it.
fn allow_list_text(stored: &[String]) -> String {
    if stored.is_empty() {
        "any address".to_owned()
    } else {
        stored.join(", ")
    }
}

impl PgStore {
    /// Revokes the row `id` of `kind` (within the customer of `within`, if given) at once,
    /// with `action` in the customer's audit log; `None` when there is no such row. Revoking
    /// twice keeps the first time; the flag says whether this call revoked it.
    pub(crate) async fn revoke(
        &self,
        within: Option<CustomerScope>,
        id: KeyId,
        kind: &str,
        action: &str,
        by: &Actor,
    ) -> Result<Option<(ApiKeyRow, bool)>> {
        let customer = within.map(|scope| scope.customer_id().as_uuid());
        let mut conn = self.conn().await?;
        let revoked = conn
            .transaction(async |conn| {
                let current = api_keys::table
                    .filter(api_keys::id.eq(id.as_uuid()))
                    .filter(api_keys::kind.eq(kind))
                    .filter(
                        api_keys::customer_id
                            .nullable()
                            .eq(customer)
                            .or(customer.is_none().into_sql::<Bool>()),
                    )
                    .for_update()
                    .select(ApiKeyRow::as_select())
                    .first::<ApiKeyRow>(conn)
                    .await
                    .optional()?;
                let Some(current) = current else {
                    return Ok(None);
                };
                if current.revoked_at.is_some() {
                    return Ok::<_, diesel::result::Error>(Some((current, false)));
                }
                let row = diesel::update(api_keys::table.find(id.as_uuid()))
                    .set(api_keys::revoked_at.eq(db_now()))
                    .returning(ApiKeyRow::as_returning())
                    .get_result::<ApiKeyRow>(conn)
                    .await?;
                audit(conn, &row, action, by).await?;
                Ok(Some((row, true)))
            })
            .await
            .map_err(db_error)?;
        // Other processes hear of it through NOTIFY; this one needs not wait for that.
        self.key_cache.invalidate();
        Ok(revoked)
    }
}

/// The refusal when `customer` holds `max` active keys and clients already (none under).
pub(crate) async fn over_active_limit(
    conn: &mut diesel_async::AsyncPgConnection,
    customer: CustomerId,
    max: u32,
) -> diesel::QueryResult<Option<Error>> {
    let active: i64 = api_keys::table
        .filter(api_keys::customer_id.eq(customer.as_uuid()))
        .filter(api_keys::revoked_at.is_null())
        .filter(
            api_keys::expires_at
                .is_null()
                .or(api_keys::expires_at.gt(db_now())),
        )
        .count()
        .get_result(conn)
        .await?;
    Ok((active >= i64::from(max)).then(|| {
        Error::Conflict(format!(
            "the customer holds {active} active keys and OAuth clients, the most allowed \
             ({max}): revoke one it no longer uses first"
        ))
    }))
}
