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
    ApiKey, CustomerId, CustomerScope, Error, KeyHash, KeyId, Principal, Result, Scope, ScopeSet,
    allow_list::AllowList,
    api_key::{CredentialUse, CurrentKey, NewApiKey, inactive_at, inactive_reason},
    audit::{AuditAction, aggregate_id, hour_of},
    console::Actor,
    oauth::TokenClaims,
    ports::{ApiKeyRepository, KnownKey},
};
use uuid::Uuid;

use crate::{
    PgStore,
    error::{corrupt, db_error, is_foreign_key_violation, is_unique_violation},
    schema::{api_keys, console_audit, customers},
    store::Hourly,
};

#[derive(Queryable, Selectable)]
#[diesel(table_name = api_keys, check_for_backend(diesel::pg::Pg))]
pub(crate) struct ApiKeyRow {
    pub(crate) id: Uuid,
    customer_id: Uuid,
    name: String,
    prefix: String,
    scopes: Vec<String>,
    created_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
    pub(crate) revoked_at: Option<DateTime<Utc>>,
    last_used_at: Option<DateTime<Utc>>,
    created_by: String,
    allow_from: Vec<String>,
    last_used_from: Option<String>,
    last_used_user_agent: Option<String>,
}

/// `api_keys.kind` of a key (the other kind is an OAuth client, `clients.rs`).
const KEY: &str = "key";

pub(crate) fn allow_list(stored: &[String]) -> Result<AllowList> {
    AllowList::from_stored(stored).map_err(|e| corrupt("allow-list", e))
}

pub(crate) fn scope_set(scopes: &[String]) -> Result<ScopeSet> {
    scopes
        .iter()
        .map(|s| s.parse::<Scope>().map_err(|e| corrupt("scope", e)))
        .collect()
}

impl TryFrom<ApiKeyRow> for ApiKey {
    type Error = Error;

    fn try_from(row: ApiKeyRow) -> Result<Self> {
        Ok(ApiKey {
            id: KeyId::from_uuid(row.id),
            customer_id: CustomerId::from_uuid(row.customer_id),
            name: row.name,
            prefix: row.prefix,
            scopes: scope_set(&row.scopes)?,
            created_at: row.created_at,
            expires_at: row.expires_at,
            revoked_at: row.revoked_at,
            last_used_at: row.last_used_at,
            last_used_from: row.last_used_from.and_then(|a| a.parse().ok()),
            last_used_user_agent: row.last_used_user_agent,
            created_by: row.created_by,
            allow_from: allow_list(&row.allow_from)?,
        })
    }
}

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

/// One line of the customer's audit log about a key, in the caller's transaction.
pub(crate) async fn audit(
    conn: &mut diesel_async::AsyncPgConnection,
    key: &ApiKeyRow,
    action: &str,
    by: &Actor,
) -> diesel::QueryResult<()> {
    let named = NamedKey {
        id: key.id,
        customer: key.customer_id,
        name: &key.name,
        prefix: &key.prefix,
    };
    credential_line(conn, Uuid::now_v7(), &named, action, by, None).await
}

/// The credential an audit line names.
pub(crate) struct NamedKey<'a> {
    pub(crate) id: Uuid,
    pub(crate) customer: Uuid,
    pub(crate) name: &'a str,
    pub(crate) prefix: &'a str,
}

/// One line of the customer's audit log about a credential, with the actor's address;
/// `id` already in the log (an aggregated line) writes nothing.
pub(crate) async fn credential_line(
    conn: &mut diesel_async::AsyncPgConnection,
    id: Uuid,
    key: &NamedKey<'_>,
    action: &str,
    by: &Actor,
    detail: Option<String>,
) -> diesel::QueryResult<()> {
    diesel::insert_into(console_audit::table)
        .values((
            console_audit::customer_id.eq(key.customer),
            console_audit::id.eq(id),
            console_audit::actor_kind.eq(by.kind()),
            console_audit::actor_subject.eq(by.subject()),
            console_audit::actor_name.eq(by.name()),
            console_audit::action.eq(action),
            console_audit::key_id.eq(key.id),
            console_audit::key_name.eq(key.name),
            console_audit::key_prefix.eq(key.prefix),
            console_audit::detail.eq(detail),
            console_audit::source_ip.eq(by.source_ip().map(|ip| ip.to_string())),
        ))
        .on_conflict_do_nothing()
        .execute(conn)
        .await
        .map(drop)
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

impl PgStore {
    /// The principal presented as `hash`: from the key cache, or `find` (its principal and
    /// when it stops being valid) at the store, remembered either way; its use recorded.
    async fn cached_principal<F, Fut>(&self, hash: &KeyHash, find: F) -> Result<Option<Principal>>
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
    async fn find_valid_key(
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
    fn note_lapsed(&self, principal: &Principal, now: DateTime<Utc>) {
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
    fn check_activity(
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
    async fn find_valid_client(
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

    /// Records a use of a credential: its last use, and the address in the audit log when
    /// it is the credential's first use from there (of the first
    /// [`MAX_ADDRESSES_REMEMBERED`] addresses).
    async fn touch_key(&self, principal: &Principal, used: CredentialUse) {
        let key = principal.key_id();
        let result = async {
            let mut conn = self.conn().await?;
            let from = used.from.to_string();
            // A later use written first stays: the last use never moves backwards.
            diesel::update(
                api_keys::table.find(key.as_uuid()).filter(
                    api_keys::last_used_at
                        .is_null()
                        .or(api_keys::last_used_at.le(used.at)),
                ),
            )
            .set((
                api_keys::last_used_at.eq(used.at),
                api_keys::last_used_from.eq(&from),
                api_keys::last_used_user_agent.eq(&used.user_agent),
            ))
            .execute(&mut conn)
            .await
            .map_err(db_error)?;
            let named: Option<(String, String)> = api_keys::table
                .find(key.as_uuid())
                .select((api_keys::name, api_keys::prefix))
                .first(&mut conn)
                .await
                .optional()
                .map_err(db_error)?;
            let Some((name, prefix)) = named else {
                return Ok(());
            };
            let customer = principal.customer_id().as_uuid();
            let new = diesel::sql_query(
                "INSERT INTO credential_addresses (customer_id, key_id, address, first_seen) \
                 SELECT $1, $2, $3, $4 \
                 WHERE (SELECT count(*) FROM credential_addresses \
                        WHERE customer_id = $1 AND key_id = $2) < $5 \
                 ON CONFLICT DO NOTHING",
            )
            .bind::<diesel::sql_types::Uuid, _>(customer)
            .bind::<diesel::sql_types::Uuid, _>(key.as_uuid())
            .bind::<diesel::sql_types::Text, _>(&from)
            .bind::<Timestamptz, _>(used.at)
            .bind::<diesel::sql_types::BigInt, _>(MAX_ADDRESSES_REMEMBERED)
            .execute(&mut conn)
            .await
            .map_err(db_error)?;
            if new == 0 {
                return Ok(());
            }
            let action = AuditAction::for_credential(
                &prefix,
                AuditAction::KeyUsedFromNewAddress,
                AuditAction::ClientUsedFromNewAddress,
            );
            let by = Actor::Credential {
                id: key,
                name: name.clone(),
                from: Some(used.from),
            };
            let detail = match &used.user_agent {
                Some(agent) => format!("first use from {from} (User-Agent: {agent})"),
                None => format!("first use from {from}"),
            };
            let named = NamedKey {
                id: key.as_uuid(),
                customer,
                name: &name,
                prefix: &prefix,
            };
            credential_line(
                &mut conn,
                Uuid::now_v7(),
                &named,
                action.as_str(),
                &by,
                Some(detail),
            )
            .await
            .map_err(db_error)
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(key.id = %key, error = %e, "could not record the key's last use");
        }
    }

    /// Writes a refusal by allow-list to the audit log: one line per credential, address
    /// and hour, however many instances refuse it.
    async fn write_refusal(&self, principal: &Principal, from: IpAddr, at: DateTime<Utc>) {
        let detail = format!(
            "refused from {from}, which its allow-list does not name; further refusals from \
             this address this hour are not logged again"
        );
        self.write_aggregated(
            principal,
            Some(from),
            at,
            (
                AuditAction::KeyRefusedByAllowList,
                AuditAction::ClientRefusedByAllowList,
            ),
            Some(from),
            detail,
        )
        .await;
    }

    /// Writes the aggregated line `actions` (of a key, of a client) of `principal`'s
    /// credential, from `from`: once per credential, `per` address (or none) and hour of
    /// `at`, however many instances write it.
    async fn write_aggregated(
        &self,
        principal: &Principal,
        from: Option<IpAddr>,
        at: DateTime<Utc>,
        actions: (AuditAction, AuditAction),
        per: Option<IpAddr>,
        detail: String,
    ) {
        let key = principal.key_id();
        let result = async {
            let mut conn = self.conn().await?;
            let named: Option<(String, String)> = api_keys::table
                .find(key.as_uuid())
                .select((api_keys::name, api_keys::prefix))
                .first(&mut conn)
                .await
                .optional()
                .map_err(db_error)?;
            let Some((name, prefix)) = named else {
                return Ok(());
            };
            let action = AuditAction::for_credential(&prefix, actions.0, actions.1);
            let id = aggregate_id(action, key, per, hour_of(at));
            let by = Actor::Credential {
                id: key,
                name: name.clone(),
                from,
            };
            let named = NamedKey {
                id: key.as_uuid(),
                customer: principal.customer_id().as_uuid(),
                name: &name,
                prefix: &prefix,
            };
            credential_line(&mut conn, id, &named, action.as_str(), &by, Some(detail))
                .await
                .map_err(db_error)
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(key.id = %key, error = %e, "could not write an audit line of a credential");
        }
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

/// Most addresses remembered per credential: its first uses from more are not logged.
const MAX_ADDRESSES_REMEMBERED: i64 = 1_000;

/// `(customer_id, scopes, expires_at, allow_from)` of a client.
type ClientRow = (Uuid, Vec<String>, Option<DateTime<Utc>>, Vec<String>);
