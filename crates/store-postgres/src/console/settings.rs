//! A customer's sign-in settings, changed by an operator, and the customer's audit log.
//!
//! A change of who can be an admin (another issuer, another admin rule) ends the customer's
//! console sessions in the same transaction: a session is only as good as the rule it was
//! admitted by. Setting and clearing are both written to the customer's audit log, with the
//! sessions they ended.

use chrono::{DateTime, Utc};
use diesel::{prelude::*, upsert::excluded};
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    CustomerScope, KeyId, Result,
    console::{Actor, AuditEvent, AuditedKey, SessionsToEnd, SsoSettings},
    ports::SsoChange,
    secrets::SealedSecret,
};
use uuid::Uuid;

use super::SsoRow;
use crate::{
    api_keys::db_now,
    error::{db_error, is_foreign_key_violation},
    schema::{console_audit, console_sessions, console_sso},
};

/// Ends the customer's live sessions; returns how many.
pub(super) async fn end_sessions(conn: &mut AsyncPgConnection, customer: Uuid) -> QueryResult<u64> {
    diesel::update(
        console_sessions::table
            .filter(console_sessions::customer_id.eq(customer))
            .filter(console_sessions::ended_at.is_null()),
    )
    .set(console_sessions::ended_at.eq(db_now()))
    .execute(conn)
    .await
    .map(|n| n as u64)
}

/// A line of the customer's audit log that names no key.
pub(crate) async fn audit_line(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    by: &Actor,
    action: &str,
    detail: Option<String>,
) -> QueryResult<()> {
    diesel::insert_into(console_audit::table)
        .values((
            console_audit::customer_id.eq(customer),
            console_audit::id.eq(Uuid::now_v7()),
            console_audit::actor_kind.eq(by.kind()),
            console_audit::actor_subject.eq(by.subject()),
            console_audit::actor_name.eq(by.name()),
            console_audit::action.eq(action),
            console_audit::detail.eq(detail),
            console_audit::source_ip.eq(by.source_ip().map(|ip| ip.to_string())),
        ))
        .execute(conn)
        .await
        .map(drop)
}

/// A line of the customer's audit log about its sign-in settings, by the operator.
async fn audit(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    action: &str,
    detail: String,
) -> QueryResult<()> {
    audit_line(conn, customer, &Actor::Operator, action, Some(detail)).await
}

/// A line of the customer's audit log about an admin's session: `session.signed_in`,
/// `session.signed_out`.
pub(super) async fn session_audit(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    admin: &Actor,
    action: &str,
) -> QueryResult<()> {
    audit_line(conn, customer, admin, action, None).await
}

pub(super) fn sessions_ended(n: u64) -> String {
    match n {
        0 => "no console session was open".to_owned(),
        1 => "1 console session ended".to_owned(),
        n => format!("{n} console sessions ended"),
    }
}

/// Sets or replaces the settings; ends the sessions when who can be an admin changed.
pub(super) async fn set(
    conn: &mut AsyncPgConnection,
    scope: CustomerScope,
    new: &SsoSettings,
    sealed_secret: SealedSecret,
) -> Result<SsoChange> {
    let customer = scope.customer_id().as_uuid();
    let (issuer, admins) = (new.issuer.as_str(), &new.admins);
    let settings = (
        console_sso::issuer.eq(issuer),
        console_sso::client_id.eq(&new.client_id),
        console_sso::display_name.eq(&new.display_name),
        console_sso::secret_key_id.eq(&sealed_secret.key_id),
        console_sso::secret_nonce.eq(&sealed_secret.nonce),
        console_sso::secret_ciphertext.eq(&sealed_secret.ciphertext),
        console_sso::admin_claim.eq(&admins.claim),
        console_sso::admin_values.eq(&admins.values),
        console_sso::admin_subjects.eq(&admins.subjects),
    );
    let outcome = conn
        .transaction(async |conn| {
            let before: Option<SsoRow> = console_sso::table
                .find(customer)
                .select(SsoRow::as_select())
                .for_update()
                .first(conn)
                .await
                .optional()?;
            let row: SsoRow = diesel::insert_into(console_sso::table)
                .values((
                    console_sso::customer_id.eq(customer),
                    settings,
                    console_sso::updated_at.eq(diesel::dsl::now),
                ))
                .on_conflict(console_sso::customer_id)
                .do_update()
                // The database's time, taken in VALUES: Citus refuses a function that is not
                // immutable in DO UPDATE SET.
                .set((
                    settings,
                    console_sso::updated_at.eq(excluded(console_sso::updated_at)),
                ))
                .returning(SsoRow::as_returning())
                .get_result(conn)
                .await?;
            // The client's id or secret alone does not change who is an admin.
            let admits_otherwise = before.is_none_or(|b| {
                b.issuer != issuer
                    || b.admin_claim != admins.claim
                    || b.admin_values != admins.values
                    || b.admin_subjects != admins.subjects
            });
            let (ended, sessions) = if admits_otherwise {
                let ended = end_sessions(conn, customer).await?;
                (ended, sessions_ended(ended))
            } else {
                (0, "the same admins: console sessions kept".to_owned())
            };
            let detail = format!("issuer {issuer}; {sessions}");
            audit(conn, customer, "sso.set", detail).await?;
            Ok::<_, diesel::result::Error>(SsoChange {
                sso: row.split().0,
                sessions_ended: ended,
            })
        })
        .await;
    match outcome {
        Ok(change) => Ok(change),
        Err(e) if is_foreign_key_violation(&e) => Err(posture_domain::Error::NotFound),
        Err(e) => Err(db_error(e)),
    }
}

/// Removes the settings and ends every session; `None` if there were none.
pub(super) async fn clear(
    conn: &mut AsyncPgConnection,
    scope: CustomerScope,
) -> Result<Option<u64>> {
    let customer = scope.customer_id().as_uuid();
    conn.transaction(async |conn| {
        let ended = end_sessions(conn, customer).await?;
        let removed =
            diesel::delete(console_sso::table.filter(console_sso::customer_id.eq(customer)))
                .execute(conn)
                .await?;
        if removed == 0 {
            return Ok(None);
        }
        audit(conn, customer, "sso.cleared", sessions_ended(ended)).await?;
        Ok::<_, diesel::result::Error>(Some(ended))
    })
    .await
    .map_err(db_error)
}

/// Ends sessions other than `own` (live at `now`: not ended, not expired, used after
/// `idle_since`) and
/// says so in the audit log, in one transaction.
pub(super) async fn end_sessions_of_others(
    conn: &mut AsyncPgConnection,
    scope: CustomerScope,
    (own, which): ([u8; 32], SessionsToEnd),
    (now, idle_since): (DateTime<Utc>, DateTime<Utc>),
    by: &Actor,
) -> Result<u64> {
    let customer = scope.customer_id().as_uuid();
    conn.transaction(async |conn| {
        let live = console_sessions::table
            .filter(console_sessions::customer_id.eq(customer))
            .filter(console_sessions::ended_at.is_null())
            .filter(console_sessions::expires_at.gt(now))
            .filter(console_sessions::last_seen_at.gt(idle_since))
            .filter(console_sessions::token_hash.ne(own.as_slice()));
        let ended: Vec<(String, String)> = match which {
            SessionsToEnd::One(id) => {
                diesel::update(live.filter(console_sessions::id.eq(id)))
                    .set(console_sessions::ended_at.eq(now))
                    .returning((console_sessions::subject, console_sessions::display_name))
                    .get_results(conn)
                    .await?
            }
            SessionsToEnd::AllOthers => {
                diesel::update(live)
                    .set(console_sessions::ended_at.eq(now))
                    .returning((console_sessions::subject, console_sessions::display_name))
                    .get_results(conn)
                    .await?
            }
        };
        let detail = match (which, ended.as_slice()) {
            (_, []) => return Ok(0),
            (SessionsToEnd::One(_), [(subject, name)]) => {
                format!("ended the session of {name} ({subject})")
            }
            (_, [_]) => "ended 1 other session".to_owned(),
            (_, all) => format!("ended {} other sessions", all.len()),
        };
        audit_line(conn, customer, by, "session.ended", Some(detail)).await?;
        Ok::<_, diesel::result::Error>(ended.len() as u64)
    })
    .await
    .map_err(db_error)
}

/// A line of the audit log as read.
#[derive(Queryable, Selectable)]
#[diesel(table_name = console_audit, check_for_backend(diesel::pg::Pg))]
pub(crate) struct AuditRow {
    id: Uuid,
    at: DateTime<Utc>,
    actor_kind: String,
    actor_subject: String,
    actor_name: String,
    action: String,
    key_id: Option<Uuid>,
    key_name: Option<String>,
    key_prefix: Option<String>,
    detail: Option<String>,
    source_ip: Option<String>,
    target_id: Option<Uuid>,
    target_name: Option<String>,
}

pub(crate) fn to_audit_event(row: AuditRow) -> AuditEvent {
    let key = match (row.key_id, row.key_name, row.key_prefix) {
        (Some(id), Some(name), Some(prefix)) => Some(AuditedKey {
            id: KeyId::from_uuid(id),
            name,
            prefix,
        }),
        _ => None,
    };
    AuditEvent {
        id: row.id,
        at: row.at,
        actor_kind: row.actor_kind,
        actor_subject: row.actor_subject,
        actor_name: row.actor_name,
        action: row.action,
        key,
        detail: row.detail,
        source_ip: row.source_ip.and_then(|ip| ip.parse().ok()),
        target: row.target_id.zip(row.target_name),
    }
}

/// A page of the customer's audit log, newest first, older than the line `before`.
pub(super) async fn audit_log(
    conn: &mut AsyncPgConnection,
    scope: CustomerScope,
    before: Option<Uuid>,
    limit: u32,
) -> Result<Vec<AuditEvent>> {
    let customer = scope.customer_id().as_uuid();
    let mut query = console_audit::table
        .filter(console_audit::customer_id.eq(customer))
        .order((console_audit::at.desc(), console_audit::id.desc()))
        .limit(i64::from(limit))
        .select(AuditRow::as_select())
        .into_boxed();
    if let Some(before) = before {
        let at: DateTime<Utc> = console_audit::table
            .find((customer, before))
            .select(console_audit::at)
            .first(conn)
            .await
            .optional()
            .map_err(db_error)?
            .ok_or(posture_domain::Error::NotFound)?;
        query = query.filter(
            console_audit::at
                .lt(at)
                .or(console_audit::at.eq(at).and(console_audit::id.lt(before))),
        );
    }
    let rows: Vec<AuditRow> = query.load(conn).await.map_err(db_error)?;
    Ok(rows.into_iter().map(to_audit_event).collect())
}

/// Ends the session of `token_hash` (a sign-out), with `session.signed_out` in the audit log.
pub(super) async fn end_session(
    conn: &mut AsyncPgConnection,
    scope: CustomerScope,
    token_hash: [u8; 32],
) -> Result<()> {
    let customer = scope.customer_id().as_uuid();
    conn.transaction(async |conn| {
        let ended: Option<(String, String)> = diesel::update(
            console_sessions::table
                .filter(console_sessions::customer_id.eq(customer))
                .filter(console_sessions::token_hash.eq(token_hash.as_slice()))
                .filter(console_sessions::ended_at.is_null()),
        )
        .set(console_sessions::ended_at.eq(db_now()))
        .returning((console_sessions::subject, console_sessions::display_name))
        .get_result(conn)
        .await
        .optional()?;
        match ended {
            Some((subject, name)) => {
                let admin = Actor::Admin {
                    subject,
                    name,
                    from: None,
                };
                session_audit(conn, customer, &admin, "session.signed_out").await
            }
            None => Ok(()),
        }
    })
    .await
    .map_err(db_error)
}
