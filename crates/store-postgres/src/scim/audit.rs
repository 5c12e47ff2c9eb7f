//! SCIM's lines of the customer's audit log: each change's, by the key that made it, in the
//! change's transaction.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::{KeyId, Result};
use uuid::Uuid;

use crate::{
    error::db_error,
    schema::{api_keys, console_audit, scim_users},
};

/// The key making SCIM's writes, as its audit lines name it (read before the write's
/// transaction: on Citus keys are a plain table of the coordinator).
pub(crate) struct Writer {
    customer: Uuid,
    key: Uuid,
    name: String,
    prefix: String,
}

impl Writer {
    pub(crate) async fn of(
        conn: &mut AsyncPgConnection,
        customer: Uuid,
        by: KeyId,
    ) -> Result<Self> {
        let (name, prefix) = api_keys::table
            .find(by.as_uuid())
            .filter(api_keys::customer_id.eq(customer))
            .select((api_keys::name, api_keys::prefix))
            .first::<(String, String)>(conn)
            .await
            .optional()
            .map_err(db_error)?
            .unwrap_or_default();
        Ok(Self {
            customer,
            key: by.as_uuid(),
            name,
            prefix,
        })
    }

    /// Ends, in the caller's transaction, the console sessions of provisioned users this
    /// change took out (when the customer requires provisioning), with a `session.ended`
    /// line by the key.
    pub(crate) async fn end_sessions_of_the_unadmitted(
        &self,
        conn: &mut AsyncPgConnection,
    ) -> QueryResult<()> {
        let ended = crate::console::end_sessions_of_the_unadmitted(conn, self.customer).await?;
        let detail = match ended.as_slice() {
            [] => return Ok(()),
            [(subject, name)] => format!(
                "ended the session of {name} ({subject}): no longer an active member of the \
                 admin group"
            ),
            all => format!(
                "ended {} sessions: their users are no longer active members of the admin group",
                all.len()
            ),
        };
        self.line(conn, "session.ended", None, None, detail).await
    }

    /// The audit line of one change to `target` (the user's or group's id and name), in
    /// the caller's transaction.
    pub(crate) async fn audit(
        &self,
        conn: &mut AsyncPgConnection,
        action: &str,
        target: (Uuid, &str),
        detail: String,
    ) -> QueryResult<()> {
        let key = (self.key, self.name.as_str(), self.prefix.as_str());
        self.line(conn, action, Some(key), Some(target), detail)
            .await
    }

    /// A line by the key; `key` names the key the line is about (a SCIM change's line
    /// names the key that made it; a `session.ended` line names none).
    async fn line(
        &self,
        conn: &mut AsyncPgConnection,
        action: &str,
        key: Option<(Uuid, &str, &str)>,
        target: Option<(Uuid, &str)>,
        detail: String,
    ) -> QueryResult<()> {
        diesel::insert_into(console_audit::table)
            .values((
                console_audit::customer_id.eq(self.customer),
                console_audit::id.eq(Uuid::now_v7()),
                console_audit::actor_kind.eq("key"),
                console_audit::actor_subject.eq(self.key.to_string()),
                console_audit::actor_name.eq(&self.name),
                console_audit::action.eq(action),
                console_audit::key_id.eq(key.map(|k| k.0)),
                console_audit::key_name.eq(key.map(|k| k.1)),
                console_audit::key_prefix.eq(key.map(|k| k.2)),
                console_audit::detail.eq(detail),
                console_audit::target_id.eq(target.map(|t| t.0)),
                console_audit::target_name.eq(target.map(|t| t.1)),
            ))
            .execute(conn)
            .await
            .map(drop)
    }
}

/// The users whose member rows a change inserted and deleted.
#[derive(Default)]
pub(super) struct Moved {
    pub(super) added: Vec<Uuid>,
    pub(super) removed: Vec<Uuid>,
}

/// Members an audit line names at most, per list (the rest are counted).
const NAMED_MEMBERS: usize = 10;

/// What an audit line says of a group: its name, and the members a change added and
/// removed, counted and named by `userName` (the first [`NAMED_MEMBERS`] by name).
pub(super) async fn group_detail(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    name: &str,
    moved: &Moved,
) -> QueryResult<String> {
    if moved.added.is_empty() && moved.removed.is_empty() {
        return Ok(format!("displayName {name:?}"));
    }
    let mut detail = format!("displayName {name:?}");
    for (label, ids) in [("members added", &moved.added), ("removed", &moved.removed)] {
        detail.push_str(&format!(", {label} {}", ids.len()));
        if ids.is_empty() {
            continue;
        }
        let names: Vec<String> = scim_users::table
            .filter(scim_users::customer_id.eq(customer))
            .filter(scim_users::id.eq_any(ids))
            .select(scim_users::user_name)
            .order(scim_users::user_name_key)
            .limit(NAMED_MEMBERS as i64)
            .load(conn)
            .await?;
        let mut shown: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
        if ids.len() > shown.len() {
            shown.push(format!("and {} more", ids.len() - shown.len()));
        }
        detail.push_str(&format!(" ({})", shown.join(", ")));
    }
    Ok(detail)
}
