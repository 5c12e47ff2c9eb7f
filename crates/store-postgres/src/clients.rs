//! OAuth 2.0 clients: rows of `api_keys` of kind `client`, their credentials
//! (`client_credentials`) and the assertions they used (`client_assertions`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::{prelude::*, sql_types::Bool};
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    CustomerId, CustomerScope, Error, KeyHash, KeyId, Result, Scope,
    console::Actor,
    credential::{inactive_at, inactive_reason},
    oauth::{
        ClientCredential, ClientForAuth, ClientPublicKey, CredentialKind, MAX_CREDENTIALS,
        NewClient, NewCredential, OAuthClient, client_display_prefix,
    },
    ports::ClientRepository,
};
use uuid::Uuid;

use crate::{
    PgStore,
    api_keys::{ApiKeyRow, audit, scope_set},
    error::{corrupt, db_error, is_foreign_key_violation, is_unique_violation},
    schema::{api_keys, client_credentials, customers},
};

const KIND: &str = "client";
/// The refusal of a form sent a second time.
const ALREADY_SENT: &str = "this form was already used: fill it in again";

#[derive(Queryable, Selectable)]
#[diesel(table_name = client_credentials, check_for_backend(diesel::pg::Pg))]
struct CredentialRow {
    id: Uuid,
    client: Uuid,
    kind: String,
    label: String,
    secret_hash: Option<Vec<u8>>,
    algorithm: Option<String>,
    public_key: Option<serde_json::Value>,
    created_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
}

impl TryFrom<CredentialRow> for ClientCredential {
    type Error = Error;

    fn try_from(row: CredentialRow) -> Result<Self> {
        let kind = match (
            row.kind.as_str(),
            row.secret_hash,
            row.algorithm,
            row.public_key,
        ) {
            ("secret", Some(hash), _, _) => CredentialKind::Secret {
                prefix: row.label,
                hash: KeyHash(
                    hash.try_into()
                        .map_err(|_| corrupt("client secret hash", "length"))?,
                ),
            },
            ("public_key", _, Some(algorithm), Some(jwk)) => {
                CredentialKind::PublicKey(ClientPublicKey::from_stored(&algorithm, &jwk)?)
            }
            (kind, ..) => return Err(corrupt("client credential", kind)),
        };
        Ok(ClientCredential {
            id: row.id,
            kind,
            created_at: row.created_at,
            expires_at: row.expires_at,
        })
    }
}

#[derive(Insertable)]
#[diesel(table_name = client_credentials)]
struct NewCredentialRow {
    id: Uuid,
    client: Uuid,
    kind: &'static str,
    label: String,
    secret_hash: Option<Vec<u8>>,
    algorithm: Option<&'static str>,
    public_key: Option<serde_json::Value>,
}

impl NewCredentialRow {
    fn new(client: KeyId, credential: &NewCredential) -> Self {
        let (kind, label, secret_hash, algorithm, public_key) = match &credential.kind {
            CredentialKind::Secret { prefix, hash } => (
                "secret",
                prefix.clone(),
                Some(hash.as_bytes().to_vec()),
                None,
                None,
            ),
            CredentialKind::PublicKey(key) => (
                "public_key",
                key.thumbprint().to_owned(),
                None,
                Some(key.algorithm().as_str()),
                Some(key.jwk().clone()),
            ),
        };
        Self {
            id: credential.id,
            client: client.as_uuid(),
            kind,
            label,
            secret_hash,
            algorithm,
            public_key,
        }
    }
}

fn client(row: ApiKeyRow, credentials: Vec<CredentialRow>) -> Result<OAuthClient> {
    let key = posture_domain::ApiKey::try_from(row)?;
    Ok(OAuthClient {
        id: key.id,
        customer_id: key.customer_id,
        name: key.name,
        scopes: key.scopes,
        created_at: key.created_at,
        revoked_at: key.revoked_at,
        last_used_at: key.last_used_at,
        last_used_from: key.last_used_from,
        last_used_user_agent: key.last_used_user_agent,
        allow_from: key.allow_from,
        created_by: key.created_by,
        credentials: credentials
            .into_iter()
            .map(ClientCredential::try_from)
            .collect::<Result<_>>()?,
    })
}

/// The client `id`, locked for the rest of the transaction when `lock` (within the customer
/// of `within` when given).
async fn client_row(
    conn: &mut AsyncPgConnection,
    within: Option<CustomerScope>,
    id: KeyId,
    lock: bool,
) -> QueryResult<Option<ApiKeyRow>> {
    let customer = within.map(|scope| scope.customer_id().as_uuid());
    let query = api_keys::table
        .filter(api_keys::id.eq(id.as_uuid()))
        .filter(api_keys::kind.eq(KIND))
        .filter(
            api_keys::customer_id
                .nullable()
                .eq(customer)
                .or(customer.is_none().into_sql::<Bool>()),
        )
        .select(ApiKeyRow::as_select());
    if lock {
        query.for_update().first(conn).await.optional()
    } else {
        query.first(conn).await.optional()
    }
}

async fn credentials_of(
    conn: &mut AsyncPgConnection,
    clients: &[Uuid],
) -> QueryResult<Vec<CredentialRow>> {
    client_credentials::table
        .filter(client_credentials::client.eq_any(clients))
        .order((client_credentials::created_at, client_credentials::id))
        .select(CredentialRow::as_select())
        .load(conn)
        .await
}

async fn with_credentials(conn: &mut AsyncPgConnection, row: ApiKeyRow) -> Result<OAuthClient> {
    let credentials = credentials_of(conn, &[row.id]).await.map_err(db_error)?;
    client(row, credentials)
}

#[async_trait]
impl ClientRepository for PgStore {
    async fn insert_client(&self, new: NewClient, by: &Actor) -> Result<OAuthClient> {
        let max = self.max_active_keys;
        let credential = NewCredentialRow::new(new.id, &new.credential);
        let mut conn = self.conn().await?;
        let inserted = conn
            .transaction(async |conn| {
                let customer: Option<Uuid> = customers::table
                    .find(new.customer_id.as_uuid())
                    .select(customers::id)
                    .for_update()
                    .first(conn)
                    .await
                    .optional()?;
                if customer.is_none() {
                    return Ok(Err(Error::NotFound));
                }
                if let Some(refused) =
                    crate::api_keys::over_active_limit(conn, new.customer_id, max).await?
                {
                    return Ok(Err(refused));
                }
                let row = diesel::insert_into(api_keys::table)
                    .values((
                        api_keys::id.eq(new.id.as_uuid()),
                        api_keys::customer_id.eq(new.customer_id.as_uuid()),
                        api_keys::name.eq(&new.name),
                        api_keys::prefix.eq(client_display_prefix(new.id)),
                        api_keys::scopes.eq(new
                            .scopes
                            .iter()
                            .map(Scope::as_str)
                            .collect::<Vec<_>>()),
                        api_keys::created_by.eq(by.name()),
                        api_keys::kind.eq(KIND),
                        api_keys::allow_from.eq(new.allow_from.to_strings()),
                    ))
                    .returning(ApiKeyRow::as_returning())
                    .get_result::<ApiKeyRow>(conn)
                    .await?;
                diesel::insert_into(client_credentials::table)
                    .values(&credential)
                    .execute(conn)
                    .await?;
                audit(conn, &row, "client.issued", by).await?;
                let credentials = credentials_of(conn, &[row.id]).await?;
                Ok::<_, diesel::result::Error>(Ok((row, credentials)))
            })
            .await;
        match inserted {
            Ok(Ok((row, credentials))) => client(row, credentials),
            Ok(Err(refused)) => Err(refused),
            Err(e) if is_foreign_key_violation(&e) => Err(Error::NotFound),
            // The client's id is taken: the same issue form sent twice (the console's id is
            // the form's one-time token).
            Err(e) if is_unique_violation(&e) => Err(Error::Conflict(ALREADY_SENT.to_owned())),
            Err(e) => Err(db_error(e)),
        }
    }

    async fn list_clients(&self, scope: CustomerScope) -> Result<Vec<OAuthClient>> {
        let mut conn = self.conn().await?;
        let rows: Vec<ApiKeyRow> = api_keys::table
            .filter(api_keys::customer_id.eq(scope.customer_id().as_uuid()))
            .filter(api_keys::kind.eq(KIND))
            .order((api_keys::created_at, api_keys::id))
            .select(ApiKeyRow::as_select())
            .load(&mut conn)
            .await
            .map_err(db_error)?;
        let ids: Vec<Uuid> = rows.iter().map(|row| row.id).collect();
        let mut credentials = credentials_of(&mut conn, &ids).await.map_err(db_error)?;
        rows.into_iter()
            .map(|row| {
                let (mine, rest) = credentials.drain(..).partition(|c| c.client == row.id);
                credentials = rest;
                client(row, mine)
            })
            .collect()
    }

    async fn find_client(&self, within: Option<CustomerScope>, id: KeyId) -> Result<OAuthClient> {
        let mut conn = self.conn().await?;
        let row = client_row(&mut conn, within, id, false)
            .await
            .map_err(db_error)?
            .ok_or(Error::NotFound)?;
        with_credentials(&mut conn, row).await
    }

    async fn revoke_client(
        &self,
        within: Option<CustomerScope>,
        id: KeyId,
        by: &Actor,
    ) -> Result<(OAuthClient, bool)> {
        let (row, revoked_now) = self
            .revoke(within, id, KIND, "client.revoked", by)
            .await?
            .ok_or(Error::NotFound)?;
        let mut conn = self.conn().await?;
        Ok((with_credentials(&mut conn, row).await?, revoked_now))
    }

    async fn add_client_credential(
        &self,
        within: Option<CustomerScope>,
        id: KeyId,
        credential: NewCredential,
        others_until: DateTime<Utc>,
        by: &Actor,
    ) -> Result<OAuthClient> {
        let new = NewCredentialRow::new(id, &credential);
        let now = self.clock.now();
        let mut conn = self.conn().await?;
        let result = conn
            .transaction(async |conn| {
                let Some(row) = client_row(conn, within, id, true).await? else {
                    return Ok(Err(Error::NotFound));
                };
                if row.revoked_at.is_some() {
                    return Ok(Err(Error::Conflict(
                        "this client is revoked: issue a new one".to_owned(),
                    )));
                }
                // What is valid after: the new one, and, through an overlap, each that has
                // not lapsed. Checked before anything changes, so a refusal changes nothing.
                if others_until > now {
                    let valid: i64 = client_credentials::table
                        .filter(client_credentials::client.eq(row.id))
                        .filter(
                            client_credentials::expires_at
                                .is_null()
                                .or(client_credentials::expires_at.gt(now)),
                        )
                        .count()
                        .get_result(conn)
                        .await?;
                    if valid >= MAX_CREDENTIALS as i64 {
                        return Ok(Err(Error::Conflict(format!(
                            "this client holds {valid} credentials that have not lapsed, the \
                             most allowed ({MAX_CREDENTIALS}) with the new one: rotate with an \
                             earlier end for the old ones"
                        ))));
                    }
                }
                diesel::update(client_credentials::table)
                    .filter(client_credentials::client.eq(row.id))
                    .filter(
                        client_credentials::expires_at
                            .is_null()
                            .or(client_credentials::expires_at.gt(others_until)),
                    )
                    .set(client_credentials::expires_at.eq(others_until))
                    .execute(conn)
                    .await?;
                diesel::insert_into(client_credentials::table)
                    .values(&new)
                    .execute(conn)
                    .await?;
                audit(conn, &row, "client.rotated", by).await?;
                let credentials = credentials_of(conn, &[row.id]).await?;
                Ok::<_, diesel::result::Error>(Ok((row, credentials)))
            })
            .await
            .map_err(|e| match e {
                // The credential's id is taken: the same rotation form sent twice.
                e if is_unique_violation(&e) => Error::Conflict(ALREADY_SENT.to_owned()),
                e => db_error(e),
            })?;
        let (row, credentials) = result?;
        client(row, credentials)
    }

    async fn client_for_auth(&self, id: KeyId) -> Result<Option<ClientForAuth>> {
        let now = self.clock.now();
        let mut conn = self.conn().await?;
        type Row = (
            Uuid,
            Vec<String>,
            Vec<String>,
            Option<DateTime<Utc>>,
            DateTime<Utc>,
            Option<i32>,
        );
        let row: Option<Row> = api_keys::table
            .inner_join(customers::table.on(customers::id.eq(api_keys::customer_id)))
            .filter(api_keys::id.eq(id.as_uuid()))
            .filter(api_keys::kind.eq(KIND))
            .filter(api_keys::revoked_at.is_null())
            .filter(
                api_keys::expires_at
                    .is_null()
                    .or(api_keys::expires_at.gt(now)),
            )
            .select((
                api_keys::customer_id,
                api_keys::scopes,
                api_keys::allow_from,
                api_keys::last_used_at,
                api_keys::created_at,
                customers::inactivity_days,
            ))
            .first(&mut conn)
            .await
            .optional()
            .map_err(db_error)?;
        let Some((customer, scopes, allow_from, last_used_at, created_at, days)) = row else {
            return Ok(None);
        };
        let credentials: Vec<CredentialRow> = client_credentials::table
            .filter(client_credentials::client.eq(id.as_uuid()))
            .filter(
                client_credentials::expires_at
                    .is_null()
                    .or(client_credentials::expires_at.gt(now)),
            )
            .select(CredentialRow::as_select())
            .load(&mut conn)
            .await
            .map_err(db_error)?;
        Ok(Some(ClientForAuth {
            id,
            customer_id: CustomerId::from_uuid(customer),
            scopes: scope_set(&scopes)?,
            allow_from: crate::api_keys::allow_list(&allow_from)?,
            lapsed: days
                .and_then(|d| u32::try_from(d).ok())
                .filter(|&d| {
                    inactive_at(last_used_at.unwrap_or(created_at), Some(d))
                        .is_some_and(|at| at <= now)
                })
                .map(|d| inactive_reason(true, d)),
            credentials: credentials
                .into_iter()
                .map(ClientCredential::try_from)
                .collect::<Result<_>>()?,
        }))
    }

    async fn remember_assertion(
        &self,
        client: KeyId,
        jti: &str,
        until: DateTime<Utc>,
    ) -> Result<bool> {
        let now = self.clock.now();
        let mut conn = self.conn().await?;
        // One statement, one commit: the client's lapsed assertions go (what is kept is
        // bounded by what the client may send within an hour), and this one is recorded
        // unless it was used before.
        let inserted = diesel::sql_query(
            "WITH lapsed AS (DELETE FROM client_assertions \
                             WHERE client = $1 AND expires_at < $2) \
             INSERT INTO client_assertions (client, jti, expires_at) VALUES ($1, $3, $4) \
             ON CONFLICT DO NOTHING",
        )
        .bind::<diesel::sql_types::Uuid, _>(client.as_uuid())
        .bind::<diesel::sql_types::Timestamptz, _>(now)
        .bind::<diesel::sql_types::Text, _>(jti)
        .bind::<diesel::sql_types::Timestamptz, _>(until)
        .execute(&mut conn)
        .await
        .map_err(db_error)?;
        Ok(inserted == 1)
    }
}
