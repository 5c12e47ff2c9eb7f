//! The customer console: sign-in configuration, pending sign-ins, sessions and the audit
//! log. Every statement filters by the customer of its scope.

mod provisioning;
mod settings;

pub(crate) use provisioning::end_sessions_of_the_unadmitted;
pub(crate) use settings::{AuditRow, audit_line, to_audit_event};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncConnection as _, RunQueryDsl};
use posture_domain::{
    CustomerScope, Result,
    console::{
        Actor, AdminRule, Admission, AuditEvent, ConsoleSession, MAX_LISTED_SESSIONS,
        MAX_PENDING_SIGN_INS, NewSession, PendingSignIn, ProvisionedSignIn, Provisioning,
        SIGN_IN_LIFETIME, SessionPolicy, SessionSummary, SessionsToEnd, SsoConfig, SsoSettings,
    },
    ids::CustomerId,
    ports::{ConsoleRepository, ConsoleSetup, SsoChange},
    secrets::SealedSecret,
};
use uuid::Uuid;

use self::settings::session_audit;
use crate::{
    PgStore,
    error::db_error,
    schema::{console_sessions, console_sign_ins, console_sso, customers},
};

#[derive(Queryable, Selectable)]
#[diesel(table_name = console_sso, check_for_backend(diesel::pg::Pg))]
struct SsoRow {
    customer_id: Uuid,
    issuer: String,
    client_id: String,
    secret_key_id: String,
    secret_nonce: Vec<u8>,
    secret_ciphertext: Vec<u8>,
    admin_claim: Option<String>,
    admin_values: Vec<String>,
    admin_subjects: Vec<String>,
    updated_at: DateTime<Utc>,
    display_name: Option<String>,
    provisioning_claim: Option<String>,
    admin_group: Option<String>,
}

impl SsoRow {
    fn split(self) -> (SsoConfig, SealedSecret) {
        let sealed = SealedSecret {
            key_id: self.secret_key_id,
            nonce: self.secret_nonce,
            ciphertext: self.secret_ciphertext,
        };
        let config = SsoConfig {
            customer_id: CustomerId::from_uuid(self.customer_id),
            issuer: self.issuer,
            client_id: self.client_id,
            display_name: self.display_name,
            provisioning: self
                .provisioning_claim
                .zip(self.admin_group)
                .map(|(claim, admin_group)| Provisioning { claim, admin_group }),
            admins: AdminRule {
                claim: self.admin_claim,
                values: self.admin_values,
                subjects: self.admin_subjects,
            },
            updated_at: self.updated_at,
        };
        (config, sealed)
    }
}

/// A sign-in admitted under settings that changed before its session was stored.
pub(super) fn settings_changed() -> posture_domain::Error {
    posture_domain::Error::PreconditionFailed(
        "the sign-in settings changed during the sign-in".to_owned(),
    )
}

fn lifetime(d: std::time::Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// Stores a new session (in the caller's transaction): ends the one it replaces, drops the
/// customer's expired sessions, and writes the sign-in to the audit log. `false`, storing
/// nothing, when the sign-in settings changed since the session was admitted. `scim_user`: the
/// provisioned user it was admitted as.
async fn insert_session(
    conn: &mut diesel_async::AsyncPgConnection,
    session: &NewSession,
    replaces: Option<[u8; 32]>,
    scim_user: Option<Uuid>,
) -> QueryResult<bool> {
    let customer = session.customer_id.as_uuid();
    if let Some(admitted_under) = session.admitted_under {
        // Held until commit: a change of the settings (FOR UPDATE) waits for this session,
        // and then ends it with the others.
        let current: Option<DateTime<Utc>> = console_sso::table
            .find(customer)
            .select(console_sso::updated_at)
            .for_share()
            .first(conn)
            .await
            .optional()?;
        if current != Some(admitted_under) {
            return Ok(false);
        }
    }
    diesel::delete(
        console_sessions::table
            .filter(console_sessions::customer_id.eq(customer))
            .filter(console_sessions::expires_at.le(session.created_at)),
    )
    .execute(conn)
    .await?;
    if let Some(old) = replaces {
        diesel::update(
            console_sessions::table
                .filter(console_sessions::customer_id.eq(customer))
                .filter(console_sessions::token_hash.eq(old.as_slice())),
        )
        .set(console_sessions::ended_at.eq(session.created_at))
        .execute(conn)
        .await?;
    }
    diesel::insert_into(console_sessions::table)
        .values((
            console_sessions::customer_id.eq(customer),
            console_sessions::token_hash.eq(session.token.hash().as_slice()),
            console_sessions::subject.eq(&session.subject),
            console_sessions::display_name.eq(&session.display_name),
            console_sessions::csrf_token.eq(&session.csrf_token),
            console_sessions::created_at.eq(session.created_at),
            console_sessions::last_seen_at.eq(session.created_at),
            console_sessions::expires_at.eq(session.expires_at),
            console_sessions::scim_user_id.eq(scim_user),
        ))
        .execute(conn)
        .await?;
    let admin = Actor::Admin {
        subject: session.subject.clone(),
        name: session.display_name.clone(),
        from: session.from,
    };
    session_audit(conn, customer, &admin, "session.signed_in").await?;
    Ok(true)
}

#[async_trait]
impl ConsoleRepository for PgStore {
    async fn set_sso(
        &self,
        scope: CustomerScope,
        settings: &SsoSettings,
        sealed_secret: SealedSecret,
    ) -> Result<SsoChange> {
        let mut conn = self.conn().await?;
        settings::set(&mut conn, scope, settings, sealed_secret).await
    }

    async fn console_setup(&self, scope: CustomerScope) -> Result<Option<ConsoleSetup>> {
        let mut conn = self.conn().await?;
        let found: Option<(String, SsoRow)> = console_sso::table
            .inner_join(customers::table.on(customers::id.eq(console_sso::customer_id)))
            .filter(console_sso::customer_id.eq(scope.customer_id().as_uuid()))
            .select((customers::name, SsoRow::as_select()))
            .first(&mut conn)
            .await
            .optional()
            .map_err(db_error)?;
        Ok(found.map(|(customer_name, row)| {
            let (sso, sealed_secret) = row.split();
            ConsoleSetup {
                customer_name,
                sso,
                sealed_secret,
            }
        }))
    }

    async fn clear_sso(&self, scope: CustomerScope) -> Result<Option<u64>> {
        let mut conn = self.conn().await?;
        settings::clear(&mut conn, scope).await
    }

    async fn begin_sign_in(
        &self,
        scope: CustomerScope,
        binding_hash: [u8; 32],
        pending: &PendingSignIn,
    ) -> Result<()> {
        let customer = scope.customer_id().as_uuid();
        let now = self.clock.now();
        let mut conn = self.conn().await?;
        diesel::delete(
            console_sign_ins::table
                .filter(console_sign_ins::customer_id.eq(customer))
                .filter(console_sign_ins::created_at.le(now - lifetime(SIGN_IN_LIFETIME))),
        )
        .execute(&mut conn)
        .await
        .map_err(db_error)?;
        // Bounded however many browsers start a sign-in: the oldest pending ones go.
        diesel::sql_query(
            "DELETE FROM console_sign_ins WHERE customer_id = $1 AND binding_hash IN ( \
                 SELECT binding_hash FROM console_sign_ins WHERE customer_id = $1 \
                 ORDER BY created_at DESC OFFSET $2)",
        )
        .bind::<diesel::sql_types::Uuid, _>(customer)
        .bind::<diesel::sql_types::BigInt, _>(MAX_PENDING_SIGN_INS - 1)
        .execute(&mut conn)
        .await
        .map_err(db_error)?;
        diesel::insert_into(console_sign_ins::table)
            .values((
                console_sign_ins::customer_id.eq(customer),
                console_sign_ins::binding_hash.eq(binding_hash.as_slice()),
                console_sign_ins::state.eq(&pending.state),
                console_sign_ins::nonce.eq(&pending.nonce),
                console_sign_ins::pkce_verifier.eq(&pending.pkce_verifier),
                console_sign_ins::created_at.eq(now),
            ))
            .execute(&mut conn)
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn take_sign_in(
        &self,
        scope: CustomerScope,
        binding_hash: [u8; 32],
    ) -> Result<Option<PendingSignIn>> {
        let oldest = self.clock.now() - lifetime(SIGN_IN_LIFETIME);
        let mut conn = self.conn().await?;
        let taken: Option<(String, String, String, DateTime<Utc>)> = diesel::delete(
            console_sign_ins::table
                .filter(console_sign_ins::customer_id.eq(scope.customer_id().as_uuid()))
                .filter(console_sign_ins::binding_hash.eq(binding_hash.as_slice())),
        )
        .returning((
            console_sign_ins::state,
            console_sign_ins::nonce,
            console_sign_ins::pkce_verifier,
            console_sign_ins::created_at,
        ))
        .get_result(&mut conn)
        .await
        .optional()
        .map_err(db_error)?;
        Ok(taken.filter(|(.., created_at)| *created_at > oldest).map(
            |(state, nonce, pkce_verifier, _)| PendingSignIn {
                state,
                nonce,
                pkce_verifier,
            },
        ))
    }

    async fn create_session(&self, session: &NewSession, replaces: Option<[u8; 32]>) -> Result<()> {
        let mut conn = self.conn().await?;
        let stored = conn
            .transaction(async |conn| insert_session(conn, session, replaces, None).await)
            .await
            .map_err(db_error)?;
        if stored {
            Ok(())
        } else {
            Err(settings_changed())
        }
    }

    async fn create_provisioned_session(
        &self,
        session: &NewSession,
        replaces: Option<[u8; 32]>,
        sign_in: &ProvisionedSignIn,
    ) -> Result<Admission> {
        let mut conn = self.conn().await?;
        provisioning::create_session(&mut conn, session, replaces, sign_in).await
    }

    async fn set_provisioning(
        &self,
        scope: CustomerScope,
        provisioning: Option<&Provisioning>,
    ) -> Result<SsoChange> {
        let mut conn = self.conn().await?;
        provisioning::set(&mut conn, scope, provisioning).await
    }

    async fn live_session(
        &self,
        scope: CustomerScope,
        token_hash: [u8; 32],
        policy: SessionPolicy,
    ) -> Result<Option<ConsoleSession>> {
        let now = self.clock.now();
        let customer = scope.customer_id();
        let mut conn = self.conn().await?;
        let found: Option<(String, String, String, DateTime<Utc>, DateTime<Utc>)> = diesel::update(
            console_sessions::table
                .filter(console_sessions::customer_id.eq(customer.as_uuid()))
                .filter(console_sessions::token_hash.eq(token_hash.as_slice()))
                .filter(console_sessions::ended_at.is_null())
                .filter(console_sessions::expires_at.gt(now))
                .filter(console_sessions::last_seen_at.gt(now - lifetime(policy.idle))),
        )
        .set(console_sessions::last_seen_at.eq(now))
        .returning((
            console_sessions::subject,
            console_sessions::display_name,
            console_sessions::csrf_token,
            console_sessions::created_at,
            console_sessions::expires_at,
        ))
        .get_result(&mut conn)
        .await
        .optional()
        .map_err(db_error)?;
        Ok(found.map(|(subject, name, csrf, created_at, expires_at)| {
            ConsoleSession::verified(customer, subject, name, csrf, created_at, expires_at)
        }))
    }

    async fn record_refused_sign_in(
        &self,
        scope: CustomerScope,
        who: &Actor,
        reason: &str,
    ) -> Result<()> {
        let mut conn = self.conn().await?;
        let (customer, reason) = (scope.customer_id().as_uuid(), Some(reason.to_owned()));
        audit_line(&mut conn, customer, who, "session.refused", reason)
            .await
            .map_err(db_error)
    }

    async fn end_session(&self, scope: CustomerScope, token_hash: [u8; 32]) -> Result<()> {
        let mut conn = self.conn().await?;
        settings::end_session(&mut conn, scope, token_hash).await
    }

    async fn live_sessions(
        &self,
        scope: CustomerScope,
        policy: SessionPolicy,
        current: [u8; 32],
    ) -> Result<Vec<SessionSummary>> {
        let now = self.clock.now();
        let mut conn = self.conn().await?;
        type Row = (
            Uuid,
            Vec<u8>,
            String,
            String,
            DateTime<Utc>,
            DateTime<Utc>,
            DateTime<Utc>,
        );
        let rows: Vec<Row> = console_sessions::table
            .filter(console_sessions::customer_id.eq(scope.customer_id().as_uuid()))
            .filter(console_sessions::ended_at.is_null())
            .filter(console_sessions::expires_at.gt(now))
            .filter(console_sessions::last_seen_at.gt(now - lifetime(policy.idle)))
            .order((console_sessions::created_at.desc(), console_sessions::id))
            .limit(i64::from(MAX_LISTED_SESSIONS))
            .select((
                console_sessions::id,
                console_sessions::token_hash,
                console_sessions::subject,
                console_sessions::display_name,
                console_sessions::created_at,
                console_sessions::last_seen_at,
                console_sessions::expires_at,
            ))
            .load(&mut conn)
            .await
            .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(
                |(id, hash, subject, display_name, created_at, last_seen_at, expires_at)| {
                    SessionSummary {
                        id,
                        current: hash == current,
                        subject,
                        display_name,
                        created_at,
                        last_seen_at,
                        expires_at,
                    }
                },
            )
            .collect())
    }

    async fn end_sessions(
        &self,
        scope: CustomerScope,
        own: [u8; 32],
        which: SessionsToEnd,
        policy: SessionPolicy,
        by: &Actor,
    ) -> Result<u64> {
        let now = self.clock.now();
        let live = (now, now - lifetime(policy.idle));
        let mut conn = self.conn().await?;
        settings::end_sessions_of_others(&mut conn, scope, (own, which), live, by).await
    }

    async fn audit_log(
        &self,
        scope: CustomerScope,
        before: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<AuditEvent>> {
        let mut conn = self.conn().await?;
        settings::audit_log(&mut conn, scope, before, limit).await
    }

    async fn client_secrets_sealed_with_other_keys(
        &self,
        current_key_id: &str,
    ) -> Result<Vec<(CustomerId, SealedSecret)>> {
        let mut conn = self.conn().await?;
        let rows: Vec<SsoRow> = crate::spanning::across_customers(
            &mut conn,
            crate::spanning::Spanning::Reseal,
            |conn| {
                Box::pin(
                    console_sso::table
                        .filter(console_sso::secret_key_id.ne(current_key_id))
                        .order(console_sso::customer_id)
                        .select(SsoRow::as_select())
                        .load(conn),
                )
            },
        )
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let (config, sealed) = row.split();
                (config.customer_id, sealed)
            })
            .collect())
    }

    async fn replace_client_secret(
        &self,
        customer: CustomerId,
        previous: &SealedSecret,
        resealed: &SealedSecret,
    ) -> Result<bool> {
        let mut conn = self.conn().await?;
        let changed = diesel::update(
            console_sso::table
                .filter(console_sso::customer_id.eq(customer.as_uuid()))
                .filter(console_sso::secret_key_id.eq(&previous.key_id))
                .filter(console_sso::secret_nonce.eq(&previous.nonce))
                .filter(console_sso::secret_ciphertext.eq(&previous.ciphertext)),
        )
        .set((
            console_sso::secret_key_id.eq(&resealed.key_id),
            console_sso::secret_nonce.eq(&resealed.nonce),
            console_sso::secret_ciphertext.eq(&resealed.ciphertext),
        ))
        .execute(&mut conn)
        .await
        .map_err(db_error)?;
        Ok(changed == 1)
    }
}
