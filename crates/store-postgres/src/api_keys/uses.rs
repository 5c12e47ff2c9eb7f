//! A credential's recorded use (its last use, its first use from each address) and the
//! audit log's lines about credentials, aggregated ones included.

use std::net::IpAddr;

use chrono::{DateTime, Utc};
use diesel::{prelude::*, sql_types::Timestamptz};
use diesel_async::RunQueryDsl;
use posture_domain::{
    Principal,
    audit::{AuditAction, aggregate_id, hour_of},
    console::Actor,
    credential::CredentialUse,
};
use uuid::Uuid;

use super::rows::ApiKeyRow;
use crate::{
    PgStore,
    error::db_error,
    schema::{api_keys, console_audit},
};

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

impl PgStore {
    /// Records a use of a credential: its last use, and the address in the audit log when
    /// it is the credential's first use from there (of the first
    /// [`MAX_ADDRESSES_REMEMBERED`] addresses).
    pub(super) async fn touch_key(&self, principal: &Principal, used: CredentialUse) {
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
    pub(super) async fn write_refusal(
        &self,
        principal: &Principal,
        from: IpAddr,
        at: DateTime<Utc>,
    ) {
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
    pub(super) async fn write_aggregated(
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

/// Most addresses remembered per credential: its first uses from more are not logged.
const MAX_ADDRESSES_REMEMBERED: i64 = 1_000;
