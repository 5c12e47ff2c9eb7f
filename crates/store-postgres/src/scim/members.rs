//! Reading a group's members: all of them (a SCIM read), or the first few and a count (a
//! page that shows some).

use std::collections::HashMap;

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::scim::{Member, ScimGroupId, ScimUserId};
use uuid::Uuid;

use crate::schema::{scim_group_members, scim_users};

/// The first `limit` members of `group` (in id order, as a full read lists them), and how
/// many it has: a page that shows a few never reads 100,000.
pub(super) async fn first(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    group: ScimGroupId,
    limit: u32,
) -> QueryResult<(Vec<Member>, u64)> {
    let total: i64 = scim_group_members::table
        .filter(scim_group_members::customer_id.eq(customer))
        .filter(scim_group_members::group_id.eq(group.as_uuid()))
        .count()
        .get_result(conn)
        .await?;
    let members = members_of(conn, customer, &[group.as_uuid()], Some(limit))
        .await?
        .remove(&group.as_uuid())
        .unwrap_or_default();
    Ok((members, u64::try_from(total).unwrap_or(0)))
}

/// The members of `groups`, by group, in id order: the first `limit` of them all.
pub(super) async fn members_of(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    groups: &[Uuid],
    limit: Option<u32>,
) -> QueryResult<HashMap<Uuid, Vec<Member>>> {
    let rows: Vec<(Uuid, Uuid, String, Option<String>)> = scim_group_members::table
        .inner_join(
            scim_users::table.on(scim_users::customer_id
                .eq(scim_group_members::customer_id)
                .and(scim_users::id.eq(scim_group_members::user_id))),
        )
        .filter(scim_group_members::customer_id.eq(customer))
        .filter(scim_users::customer_id.eq(customer))
        .filter(scim_group_members::group_id.eq_any(groups))
        .order((scim_group_members::group_id, scim_group_members::user_id))
        .select((
            scim_group_members::group_id,
            scim_group_members::user_id,
            scim_users::user_name,
            scim_users::display_name,
        ))
        .limit(limit.map_or(i64::MAX, i64::from))
        .load(conn)
        .await?;
    let mut by_group: HashMap<Uuid, Vec<Member>> = HashMap::new();
    for (group, user, user_name, display_name) in rows {
        by_group.entry(group).or_default().push(Member {
            user: ScimUserId::from_uuid(user),
            display: display_name.unwrap_or(user_name),
        });
    }
    Ok(by_group)
}
