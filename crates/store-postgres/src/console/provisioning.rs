//! Provisioning required for a customer's console: the setting, sessions admitted as a
//! provisioned user, and the sessions a SCIM change takes out.
//!
//! A provisioned sign-in holds the admin group's row and the user's row (`FOR SHARE`, in
//! that order, the order SCIM's writes lock groups and users in) while it checks and stores
//! its session. A SCIM write that would take the user out (deactivation, deletion, removal
//! from the group, the group renamed or deleted) waits for that transaction, and ends the
//! new session in its own ([`end_sessions_of_the_unadmitted`]); one that committed first is
//! what the check reads.

use diesel::{prelude::*, sql_types};
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    CustomerScope, Error, Result,
    console::{Actor, Admission, NewSession, ProvisionedSignIn, Provisioning},
    ports::SsoChange,
    scim::group_name_key,
};
use uuid::Uuid;

use super::{
    SsoRow, insert_session,
    settings::{audit_line, end_sessions, sessions_ended},
    settings_changed,
};
use crate::{
    error::db_error,
    schema::{console_sso, scim_group_members, scim_groups, scim_users},
};

fn describe(provisioning: Option<&Provisioning>) -> String {
    match provisioning {
        Some(p) => format!(
            "provisioning required: the {:?} claim matched to a provisioned userName, admins \
             the members of group {:?}",
            p.claim, p.admin_group
        ),
        None => "provisioning no longer required: admins by the admin rule".to_owned(),
    }
}

/// Sets or clears the requirement; a change ends the customer's sessions, in the audit log.
pub(super) async fn set(
    conn: &mut AsyncPgConnection,
    scope: CustomerScope,
    provisioning: Option<&Provisioning>,
) -> Result<SsoChange> {
    let customer = scope.customer_id().as_uuid();
    let outcome = conn
        .transaction(async |conn| {
            let Some(before) = console_sso::table
                .find(customer)
                .select(SsoRow::as_select())
                .for_update()
                .first(conn)
                .await
                .optional()?
            else {
                return Ok(None);
            };
            let (sso, _) = before.split();
            if sso.provisioning.as_ref() == provisioning {
                return Ok(Some(SsoChange {
                    sso,
                    sessions_ended: 0,
                }));
            }
            let row: SsoRow = diesel::update(console_sso::table.find(customer))
                .set((
                    console_sso::provisioning_claim.eq(provisioning.map(|p| &p.claim)),
                    console_sso::admin_group.eq(provisioning.map(|p| &p.admin_group)),
                    console_sso::updated_at.eq(diesel::dsl::now),
                ))
                .returning(SsoRow::as_returning())
                .get_result(conn)
                .await?;
            let ended = end_sessions(conn, customer).await?;
            let detail = format!("{}; {}", describe(provisioning), sessions_ended(ended));
            audit_line(conn, customer, &Actor::Operator, "sso.set", Some(detail)).await?;
            Ok::<_, diesel::result::Error>(Some(SsoChange {
                sso: row.split().0,
                sessions_ended: ended,
            }))
        })
        .await
        .map_err(db_error)?;
    outcome.ok_or(Error::NotFound)
}

/// Starts the session only for an active provisioned member of the admin group.
pub(super) async fn create_session(
    conn: &mut AsyncPgConnection,
    session: &NewSession,
    replaces: Option<[u8; 32]>,
    sign_in: &ProvisionedSignIn,
) -> Result<Admission> {
    let customer = session.customer_id.as_uuid();
    let admission = conn
        .transaction(async |conn| {
            let group: Option<Uuid> = scim_groups::table
                .filter(scim_groups::customer_id.eq(customer))
                .filter(scim_groups::display_name_key.eq(&sign_in.admin_group_key))
                .select(scim_groups::id)
                .for_share()
                .first(conn)
                .await
                .optional()?;
            let user: Option<(Uuid, Option<bool>)> = scim_users::table
                .filter(scim_users::customer_id.eq(customer))
                .filter(scim_users::user_name_key.eq(&sign_in.user_name_key))
                .select((scim_users::id, scim_users::active))
                .for_share()
                .first(conn)
                .await
                .optional()?;
            let user = match user {
                None => return Ok(Some(Admission::NotProvisioned)),
                Some((_, Some(false))) => return Ok(Some(Admission::Deactivated)),
                Some((id, _)) => id,
            };
            let Some(group) = group else {
                return Ok(Some(Admission::NotAdmin));
            };
            let member: bool = diesel::select(diesel::dsl::exists(
                scim_group_members::table
                    .filter(scim_group_members::customer_id.eq(customer))
                    .filter(scim_group_members::group_id.eq(group))
                    .filter(scim_group_members::user_id.eq(user)),
            ))
            .get_result(conn)
            .await?;
            if !member {
                return Ok(Some(Admission::NotAdmin));
            }
            if !insert_session(conn, session, replaces, Some(user)).await? {
                return Ok(None);
            }
            Ok::<_, diesel::result::Error>(Some(Admission::Admitted))
        })
        .await
        .map_err(db_error)?;
    admission.ok_or_else(settings_changed)
}

#[derive(QueryableByName)]
struct Ended {
    #[diesel(sql_type = sql_types::Text)]
    subject: String,
    #[diesel(sql_type = sql_types::Text)]
    display_name: String,
}

/// Ends, in the caller's transaction (a SCIM write's), the customer's live sessions whose
/// provisioned user is no longer admitted: deleted, deactivated, or not a member of the
/// admin group (a session admitted otherwise, with no provisioned user, included). Nothing
/// when the customer does not require provisioning. Expired sessions are left to the
/// sign-in that deletes them (the two statements would otherwise lock the same rows in
/// different orders). The sessions
/// ended, as (subject, display name).
pub(crate) async fn end_sessions_of_the_unadmitted(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
) -> QueryResult<Vec<(String, String)>> {
    let admin_group: Option<Option<String>> = console_sso::table
        .find(customer)
        .select(console_sso::admin_group)
        .first(conn)
        .await
        .optional()?;
    let Some(Some(admin_group)) = admin_group else {
        return Ok(Vec::new());
    };
    let ended: Vec<Ended> = diesel::sql_query(
        "UPDATE console_sessions s SET ended_at = now() \
         WHERE s.customer_id = $1 AND s.ended_at IS NULL AND s.expires_at > now() \
           AND NOT EXISTS ( \
               SELECT 1 FROM scim_users u \
               JOIN scim_group_members m ON m.customer_id = u.customer_id AND m.user_id = u.id \
               JOIN scim_groups g ON g.customer_id = m.customer_id AND g.id = m.group_id \
               WHERE u.customer_id = $1 AND u.id = s.scim_user_id \
                 AND u.active IS DISTINCT FROM false AND g.display_name_key = $2) \
         RETURNING s.subject, s.display_name",
    )
    .bind::<sql_types::Uuid, _>(customer)
    .bind::<sql_types::Text, _>(group_name_key(&admin_group))
    .load(conn)
    .await?;
    Ok(ended
        .into_iter()
        .map(|e| (e.subject, e.display_name))
        .collect())
}
