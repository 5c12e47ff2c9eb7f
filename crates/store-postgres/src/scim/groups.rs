//! SCIM groups and their members. A member change is a statement on the members table, not a
//! rewrite of the group: adding one user to a group of 100,000 costs one row.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    CustomerScope, Error, KeyId, Result,
    scim::{
        GroupAttributes, GroupFilter, GroupPatch, ListPage, ListWindow, MAX_GROUPS, MAX_MEMBERS,
        MAX_MEMBERS_LISTED, MatchOn, Member, MemberChange, ScimGroup, ScimGroupId, ScimUserId,
        group_name_key,
    },
};
use uuid::Uuid;

use super::{
    Writer,
    audit::{Moved, group_detail},
    members::members_of,
    outcome::{Tx, check_version, limit_reached, meta, settle},
};
use crate::{
    PgStore,
    error::db_error,
    schema::{scim_group_members, scim_groups, scim_users},
};

#[derive(Queryable, Selectable)]
#[diesel(table_name = scim_groups, check_for_backend(diesel::pg::Pg))]
struct GroupRow {
    id: Uuid,
    display_name: String,
    external_id: Option<String>,
    version: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl GroupRow {
    fn into_group(self, members: Option<Vec<Member>>) -> ScimGroup {
        ScimGroup {
            id: ScimGroupId::from_uuid(self.id),
            display_name: self.display_name,
            external_id: self.external_id,
            members,
            meta: meta(self.created_at, self.updated_at, self.version),
        }
    }
}

fn name_taken(name: &str) -> impl FnOnce() -> Error + '_ {
    move || Error::Conflict(format!("a group named {name:?} exists"))
}

/// Locks a group's row and checks the version the caller named; the version and name found.
async fn lock_group(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    id: ScimGroupId,
    expected: Option<&[u64]>,
) -> std::result::Result<(i64, String), Tx> {
    let (version, name) = scim_groups::table
        .filter(scim_groups::customer_id.eq(customer))
        .filter(scim_groups::id.eq(id.as_uuid()))
        .select((scim_groups::version, scim_groups::display_name))
        .for_update()
        .get_result(conn)
        .await
        .optional()?
        .ok_or(Tx::Refused(Error::NotFound))?;
    check_version(version, expected).map_err(Tx::Refused)?;
    Ok((version, name))
}

pub(super) async fn read(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    id: ScimGroupId,
    with_members: bool,
) -> QueryResult<Option<ScimGroup>> {
    let Some(row) = scim_groups::table
        .filter(scim_groups::customer_id.eq(customer))
        .filter(scim_groups::id.eq(id.as_uuid()))
        .select(GroupRow::as_select())
        .get_result(conn)
        .await
        .optional()?
    else {
        return Ok(None);
    };
    let members = if with_members {
        Some(
            members_of(conn, customer, &[row.id], None)
                .await?
                .remove(&row.id)
                .unwrap_or_default(),
        )
    } else {
        None
    };
    Ok(Some(row.into_group(members)))
}

/// Refuses a group past [`MAX_MEMBERS`], once its request's changes are made (one count
/// per request, not per change).
async fn check_member_limit(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    group: Uuid,
) -> std::result::Result<(), Tx> {
    let members: i64 = scim_group_members::table
        .filter(scim_group_members::customer_id.eq(customer))
        .filter(scim_group_members::group_id.eq(group))
        .count()
        .get_result(conn)
        .await?;
    if u64::try_from(members).unwrap_or(0) > MAX_MEMBERS {
        return Err(Tx::Refused(Error::invalid(
            "members",
            format!("a group has at most {MAX_MEMBERS} members"),
        )));
    }
    Ok(())
}

/// Applies one member change inside the caller's transaction; `Err` refuses the change.
async fn change_members(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    group: Uuid,
    change: &MemberChange,
) -> std::result::Result<Moved, Tx> {
    let of_group = || {
        scim_group_members::table
            .filter(scim_group_members::customer_id.eq(customer))
            .filter(scim_group_members::group_id.eq(group))
    };
    let (added, removed) = match change {
        MemberChange::RemoveAll => {
            let removed = diesel::delete(of_group())
                .returning(scim_group_members::user_id)
                .get_results(conn)
                .await?;
            return Ok(Moved {
                added: Vec::new(),
                removed,
            });
        }
        MemberChange::Remove(ids) => {
            let ids: Vec<Uuid> = ids.iter().map(ScimUserId::as_uuid).collect();
            let removed =
                diesel::delete(of_group().filter(scim_group_members::user_id.eq_any(ids)))
                    .returning(scim_group_members::user_id)
                    .get_results(conn)
                    .await?;
            return Ok(Moved {
                added: Vec::new(),
                removed,
            });
        }
        // Only the members not kept are deleted: the audit line names what changed.
        MemberChange::Replace(ids) => {
            let kept: Vec<Uuid> = ids.iter().map(ScimUserId::as_uuid).collect();
            let removed =
                diesel::delete(of_group().filter(scim_group_members::user_id.ne_all(kept)))
                    .returning(scim_group_members::user_id)
                    .get_results(conn)
                    .await?;
            (ids, removed)
        }
        MemberChange::Add(ids) => (ids, Vec::new()),
    };
    let wanted: BTreeSet<Uuid> = added.iter().map(ScimUserId::as_uuid).collect();
    if wanted.is_empty() {
        return Ok(Moved {
            added: Vec::new(),
            removed,
        });
    }
    let found: Vec<Uuid> = scim_users::table
        .filter(scim_users::customer_id.eq(customer))
        .filter(scim_users::id.eq_any(wanted.iter().copied().collect::<Vec<_>>()))
        .select(scim_users::id)
        .load(conn)
        .await?;
    if let Some(missing) = wanted.iter().find(|id| !found.contains(id)) {
        return Err(Tx::Refused(Error::invalid(
            "members",
            format!("{missing} is not a user provisioned for this customer"),
        )));
    }
    let rows: Vec<_> = wanted
        .iter()
        .map(|user| {
            (
                scim_group_members::customer_id.eq(customer),
                scim_group_members::group_id.eq(group),
                scim_group_members::user_id.eq(*user),
            )
        })
        .collect();
    let inserted = diesel::insert_into(scim_group_members::table)
        .values(rows)
        .on_conflict_do_nothing()
        .returning(scim_group_members::user_id)
        .get_results(conn)
        .await?;
    Ok(Moved {
        added: inserted,
        removed,
    })
}

pub(super) async fn create(
    store: &PgStore,
    scope: CustomerScope,
    by: KeyId,
    group: &GroupAttributes,
) -> Result<ScimGroup> {
    let customer = scope.customer_id().as_uuid();
    let now = store.clock.now();
    let id = ScimGroupId::generate();
    let mut conn = store.conn().await?;
    let writer = Writer::of(&mut conn, customer, by).await?;
    let outcome = conn
        .transaction(async |conn| {
            super::turns::turn_of(conn, customer, super::turns::CREATING_GROUPS).await?;
            let groups: i64 = scim_groups::table
                .filter(scim_groups::customer_id.eq(customer))
                .count()
                .get_result(conn)
                .await?;
            if u64::try_from(groups).unwrap_or(0) >= MAX_GROUPS {
                return Err(Tx::Refused(limit_reached("groups", MAX_GROUPS)));
            }
            diesel::insert_into(scim_groups::table)
                .values((
                    scim_groups::customer_id.eq(customer),
                    scim_groups::id.eq(id.as_uuid()),
                    scim_groups::display_name.eq(&group.display_name),
                    scim_groups::display_name_key.eq(group_name_key(&group.display_name)),
                    scim_groups::external_id.eq(&group.external_id),
                    scim_groups::version.eq(1_i64),
                    scim_groups::created_at.eq(now),
                    scim_groups::updated_at.eq(now),
                ))
                .execute(conn)
                .await?;
            let change = MemberChange::Add(group.members.clone());
            let moved = change_members(conn, customer, id.as_uuid(), &change).await?;
            check_member_limit(conn, customer, id.as_uuid()).await?;
            let detail = group_detail(conn, customer, &group.display_name, &moved).await?;
            let target = (id.as_uuid(), group.display_name.as_str());
            writer
                .audit(conn, "scim.group.created", target, detail)
                .await?;
            read(conn, customer, id, true)
                .await?
                .ok_or(Tx::Refused(Error::NotFound))
        })
        .await;
    settle(outcome, name_taken(&group.display_name))
}

pub(super) async fn patch(
    store: &PgStore,
    scope: CustomerScope,
    by: KeyId,
    id: ScimGroupId,
    patch: &GroupPatch,
    expected: Option<&[u64]>,
    with_members: bool,
) -> Result<ScimGroup> {
    let customer = scope.customer_id().as_uuid();
    let now = store.clock.now();
    let mut conn = store.conn().await?;
    let writer = Writer::of(&mut conn, customer, by).await?;
    let taken = patch.display_name.as_deref().unwrap_or_default();
    let outcome = conn
        .transaction(async |conn| {
            let of_group = || {
                scim_groups::table
                    .filter(scim_groups::customer_id.eq(customer))
                    .filter(scim_groups::id.eq(id.as_uuid()))
            };
            let (version, old_name) = lock_group(conn, customer, id, expected).await?;
            if let Some(name) = &patch.display_name {
                diesel::update(of_group())
                    .set((
                        scim_groups::display_name.eq(name),
                        scim_groups::display_name_key.eq(group_name_key(name)),
                    ))
                    .execute(conn)
                    .await?;
            }
            if let Some(external_id) = &patch.external_id {
                diesel::update(of_group())
                    .set(scim_groups::external_id.eq(external_id))
                    .execute(conn)
                    .await?;
            }
            let mut moved = Moved::default();
            for change in &patch.members {
                let by_change = change_members(conn, customer, id.as_uuid(), change).await?;
                moved.added.extend(by_change.added);
                moved.removed.extend(by_change.removed);
            }
            if !moved.added.is_empty() {
                check_member_limit(conn, customer, id.as_uuid()).await?;
            }
            let name = patch.display_name.as_deref().unwrap_or(&old_name);
            let mut detail = group_detail(conn, customer, name, &moved).await?;
            if patch.display_name.as_ref().is_some_and(|n| *n != old_name) {
                detail.push_str(&format!(", renamed from {old_name:?}"));
            }
            writer
                .audit(conn, "scim.group.updated", (id.as_uuid(), name), detail)
                .await?;
            writer.end_sessions_of_the_unadmitted(conn).await?;
            diesel::update(of_group())
                .set((
                    scim_groups::version.eq(version + 1),
                    scim_groups::updated_at.eq(now),
                ))
                .execute(conn)
                .await?;
            read(conn, customer, id, with_members)
                .await?
                .ok_or(Tx::Refused(Error::NotFound))
        })
        .await;
    settle(outcome, name_taken(taken))
}

pub(super) async fn delete(
    store: &PgStore,
    scope: CustomerScope,
    by: KeyId,
    id: ScimGroupId,
    expected: Option<&[u64]>,
) -> Result<()> {
    let customer = scope.customer_id().as_uuid();
    let mut conn = store.conn().await?;
    let writer = Writer::of(&mut conn, customer, by).await?;
    let outcome = conn
        .transaction(async |conn| {
            let of_group = || {
                scim_groups::table
                    .filter(scim_groups::customer_id.eq(customer))
                    .filter(scim_groups::id.eq(id.as_uuid()))
            };
            let (_, name) = lock_group(conn, customer, id, expected).await?;
            writer
                .audit(
                    conn,
                    "scim.group.deleted",
                    (id.as_uuid(), &name),
                    format!("displayName {name:?}"),
                )
                .await?;
            diesel::delete(of_group()).execute(conn).await?;
            writer.end_sessions_of_the_unadmitted(conn).await?;
            Ok(())
        })
        .await;
    settle(outcome, || {
        Error::internal("a delete met a unique constraint")
    })
}

pub(super) async fn list(
    store: &PgStore,
    scope: CustomerScope,
    filter: Option<&GroupFilter>,
    window: ListWindow,
    with_members: bool,
) -> Result<ListPage<ScimGroup>> {
    let customer = scope.customer_id().as_uuid();
    let filtered = || {
        let mut query = scim_groups::table
            .filter(scim_groups::customer_id.eq(customer))
            .into_boxed();
        for clause in filter.map(|f| f.0.as_slice()).unwrap_or_default() {
            query = match clause {
                MatchOn::Id(Some(id)) => query.filter(scim_groups::id.eq(*id)),
                MatchOn::GroupName(key) => {
                    query.filter(scim_groups::display_name_key.eq(key.clone()))
                }
                MatchOn::ExternalId(v) => query.filter(scim_groups::external_id.eq(v.clone())),
                MatchOn::Member(Some(user)) => query.filter(
                    scim_groups::id.eq_any(
                        scim_group_members::table
                            .filter(scim_group_members::customer_id.eq(customer))
                            .filter(scim_group_members::user_id.eq(user.as_uuid()))
                            .select(scim_group_members::group_id),
                    ),
                ),
                // Not a UUID, or not a group's attribute: matches nothing.
                MatchOn::Id(None)
                | MatchOn::Member(None)
                | MatchOn::UserName(_)
                | MatchOn::DisplayName(_)
                | MatchOn::Active(_) => {
                    query.filter(diesel::dsl::sql::<diesel::sql_types::Bool>("false"))
                }
            };
        }
        query
    };
    let mut conn = store.conn().await?;
    let total: i64 = filtered()
        .count()
        .get_result(&mut conn)
        .await
        .map_err(db_error)?;
    let rows: Vec<GroupRow> = if window.count == 0 {
        Vec::new()
    } else {
        filtered()
            .order(scim_groups::id)
            .offset(i64::try_from(window.offset()).unwrap_or(i64::MAX))
            .limit(i64::from(window.count))
            .select(GroupRow::as_select())
            .load(&mut conn)
            .await
            .map_err(db_error)?
    };
    let mut members = if with_members {
        let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
        let listed: i64 = scim_group_members::table
            .filter(scim_group_members::customer_id.eq(customer))
            .filter(scim_group_members::group_id.eq_any(&ids))
            .count()
            .get_result(&mut conn)
            .await
            .map_err(db_error)?;
        if u64::try_from(listed).unwrap_or(0) > MAX_MEMBERS_LISTED {
            return Err(Error::invalid(
                "page",
                format!(
                    "the page's groups have {listed} members, more than the {MAX_MEMBERS_LISTED} \
                     one answer shows: ask with excludedAttributes=members, or a smaller count"
                ),
            ));
        }
        Some(
            members_of(&mut conn, customer, &ids, None)
                .await
                .map_err(db_error)?,
        )
    } else {
        None
    };
    let resources = rows
        .into_iter()
        .map(|row| {
            let of_row = members
                .as_mut()
                .map(|m| m.remove(&row.id).unwrap_or_default());
            row.into_group(of_row)
        })
        .collect();
    Ok(ListPage {
        resources,
        total: u64::try_from(total).unwrap_or_default(),
    })
}
