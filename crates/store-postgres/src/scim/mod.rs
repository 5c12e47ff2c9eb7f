//! SCIM's users and groups in PostgreSQL (`scim_users`, `scim_groups`,
//! `scim_group_members`; migration 23). Every statement names the customer, so on Citus each
//! reaches one shard. A write locks the resource's row, checks the version the caller named
//! (`If-Match`), then writes and raises the version: two identity provider requests for one
//! resource are applied one after the other.

mod audit;
mod groups;
mod members;
mod outcome;
mod turns;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
use posture_domain::{
    CustomerScope, Error, KeyId, Result,
    ports::ScimRepository,
    scim::{
        GroupAttributes, GroupFilter, GroupPatch, ListPage, ListWindow, MAX_USERS, MatchOn,
        ScimGroup, ScimGroupId, ScimUser, ScimUserId, UserAttributes, UserExtras, UserFilter,
    },
};
use uuid::Uuid;

pub(crate) use self::audit::Writer;
use self::{
    outcome::{Tx, check_version, limit_reached, meta, settle},
    turns::{CREATING_USERS, turn_of},
};

use crate::{
    PgStore,
    error::{corrupt, db_error},
    schema::{scim_group_members, scim_groups, scim_users},
};

#[derive(Queryable, Selectable)]
#[diesel(table_name = scim_users, check_for_backend(diesel::pg::Pg))]
struct UserRow {
    id: Uuid,
    user_name: String,
    external_id: Option<String>,
    display_name: Option<String>,
    active: Option<bool>,
    attributes: serde_json::Value,
    version: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<UserRow> for ScimUser {
    type Error = Error;

    fn try_from(row: UserRow) -> Result<Self> {
        let extras: UserExtras =
            serde_json::from_value(row.attributes).map_err(|e| corrupt("a SCIM user", e))?;
        Ok(ScimUser {
            id: ScimUserId::from_uuid(row.id),
            attributes: UserAttributes {
                user_name: row.user_name,
                external_id: row.external_id,
                display_name: row.display_name,
                extras,
                active: row.active,
            },
            meta: meta(row.created_at, row.updated_at, row.version),
        })
    }
}

fn user_name_taken(user: &UserAttributes) -> impl FnOnce() -> Error + '_ {
    || Error::Conflict(format!("userName {:?} is taken", user.user_name))
}

fn extras_json(user: &UserAttributes) -> Result<serde_json::Value> {
    serde_json::to_value(&user.extras).map_err(|e| Error::internal(format!("a SCIM user: {e}")))
}

/// What a write sets of a user (an insert adds its id, version and creation).
#[derive(Insertable, AsChangeset)]
#[diesel(table_name = scim_users, treat_none_as_null = true)]
struct UserWrite<'a> {
    user_name: &'a str,
    user_name_key: String,
    external_id: Option<&'a str>,
    display_name: Option<&'a str>,
    active: Option<bool>,
    attributes: &'a serde_json::Value,
    updated_at: DateTime<Utc>,
}

impl<'a> UserWrite<'a> {
    fn new(user: &'a UserAttributes, extras: &'a serde_json::Value, now: DateTime<Utc>) -> Self {
        Self {
            user_name: &user.user_name,
            user_name_key: user.user_name_key(),
            external_id: user.external_id.as_deref(),
            display_name: user.display_name.as_deref(),
            active: user.active,
            attributes: extras,
            updated_at: now,
        }
    }
}

/// Locks a user's row and checks the version the caller named; the version and name found.
async fn lock_user(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    id: ScimUserId,
    expected: Option<&[u64]>,
) -> std::result::Result<(i64, String), Tx> {
    let (version, user_name) = scim_users::table
        .filter(scim_users::customer_id.eq(customer))
        .filter(scim_users::id.eq(id.as_uuid()))
        .select((scim_users::version, scim_users::user_name))
        // Not FOR UPDATE: a group's PATCH adding this user (its foreign key's KEY SHARE)
        // need not wait for a change of the user's attributes.
        .for_no_key_update()
        .get_result(conn)
        .await
        .optional()?
        .ok_or(Tx::Refused(Error::NotFound))?;
    check_version(version, expected).map_err(Tx::Refused)?;
    Ok((version, user_name))
}

/// What an audit line says of a user.
fn user_detail(user: &UserAttributes) -> String {
    match user.active {
        Some(active) => format!("userName {:?}, active {active}", user.user_name),
        None => format!("userName {:?}", user.user_name),
    }
}

#[async_trait]
impl ScimRepository for PgStore {
    async fn create_scim_user(
        &self,
        scope: CustomerScope,
        by: KeyId,
        user: &UserAttributes,
    ) -> Result<ScimUser> {
        let customer = scope.customer_id().as_uuid();
        let now = self.clock.now();
        let extras = extras_json(user)?;
        let mut conn = self.conn().await?;
        let writer = Writer::of(&mut conn, customer, by).await?;
        let outcome = conn
            .transaction(async |conn| {
                // Creates of one customer take turns, so that concurrent ones cannot pass
                // the limit together (as a subscription's quota does: webhooks/mod.rs).
                turn_of(conn, customer, CREATING_USERS).await?;
                let users: i64 = scim_users::table
                    .filter(scim_users::customer_id.eq(customer))
                    .count()
                    .get_result(conn)
                    .await?;
                if u64::try_from(users).unwrap_or(0) >= MAX_USERS {
                    return Err(Tx::Refused(limit_reached("users", MAX_USERS)));
                }
                let row: UserRow = diesel::insert_into(scim_users::table)
                    .values((
                        scim_users::customer_id.eq(customer),
                        scim_users::id.eq(ScimUserId::generate().as_uuid()),
                        UserWrite::new(user, &extras, now),
                        scim_users::version.eq(1_i64),
                        scim_users::created_at.eq(now),
                    ))
                    .returning(UserRow::as_returning())
                    .get_result(conn)
                    .await?;
                writer
                    .audit(
                        conn,
                        "scim.user.created",
                        (row.id, &row.user_name),
                        user_detail(user),
                    )
                    .await?;
                ScimUser::try_from(row).map_err(Tx::Refused)
            })
            .await;
        settle(outcome, user_name_taken(user))
    }

    async fn scim_user(&self, scope: CustomerScope, id: ScimUserId) -> Result<Option<ScimUser>> {
        let mut conn = self.conn().await?;
        scim_users::table
            .filter(scim_users::customer_id.eq(scope.customer_id().as_uuid()))
            .filter(scim_users::id.eq(id.as_uuid()))
            .select(UserRow::as_select())
            .get_result(&mut conn)
            .await
            .optional()
            .map_err(db_error)?
            .map(ScimUser::try_from)
            .transpose()
    }

    async fn replace_scim_user(
        &self,
        scope: CustomerScope,
        by: KeyId,
        id: ScimUserId,
        user: &UserAttributes,
        expected: Option<&[u64]>,
    ) -> Result<ScimUser> {
        let customer = scope.customer_id().as_uuid();
        let now = self.clock.now();
        let extras = extras_json(user)?;
        let mut conn = self.conn().await?;
        let writer = Writer::of(&mut conn, customer, by).await?;
        let outcome = conn
            .transaction(async |conn| {
                let (version, _) = lock_user(conn, customer, id, expected).await?;
                let row: UserRow = diesel::update(
                    scim_users::table
                        .filter(scim_users::customer_id.eq(customer))
                        .filter(scim_users::id.eq(id.as_uuid())),
                )
                .set((
                    UserWrite::new(user, &extras, now),
                    scim_users::version.eq(version + 1),
                ))
                .returning(UserRow::as_returning())
                .get_result(conn)
                .await?;
                writer
                    .audit(
                        conn,
                        "scim.user.updated",
                        (row.id, &row.user_name),
                        user_detail(user),
                    )
                    .await?;
                writer.end_sessions_of_the_unadmitted(conn).await?;
                ScimUser::try_from(row).map_err(Tx::Refused)
            })
            .await;
        settle(outcome, user_name_taken(user))
    }

    async fn delete_scim_user(
        &self,
        scope: CustomerScope,
        by: KeyId,
        id: ScimUserId,
        expected: Option<&[u64]>,
    ) -> Result<()> {
        let customer = scope.customer_id().as_uuid();
        let now = self.clock.now();
        let mut conn = self.conn().await?;
        let writer = Writer::of(&mut conn, customer, by).await?;
        let outcome = conn
            .transaction(async |conn| {
                // The groups it leaves change too (their members' list): locked first, in
                // id order, as a group's PATCH locks its group before the users it adds,
                // so the two wait for each other in one order and never deadlock.
                let groups_of_user: Vec<Uuid> = scim_groups::table
                    .filter(scim_groups::customer_id.eq(customer))
                    .filter(
                        scim_groups::id.eq_any(
                            scim_group_members::table
                                .filter(scim_group_members::customer_id.eq(customer))
                                .filter(scim_group_members::user_id.eq(id.as_uuid()))
                                .select(scim_group_members::group_id),
                        ),
                    )
                    .order(scim_groups::id)
                    .select(scim_groups::id)
                    .for_update()
                    .load(conn)
                    .await?;
                let (_, user_name) = lock_user(conn, customer, id, expected).await?;
                writer
                    .audit(
                        conn,
                        "scim.user.deleted",
                        (id.as_uuid(), &user_name),
                        format!("userName {user_name:?}"),
                    )
                    .await?;
                diesel::update(
                    scim_groups::table
                        .filter(scim_groups::customer_id.eq(customer))
                        .filter(scim_groups::id.eq_any(groups_of_user)),
                )
                .set((
                    scim_groups::version.eq(scim_groups::version + 1),
                    scim_groups::updated_at.eq(now),
                ))
                .execute(conn)
                .await?;
                diesel::delete(
                    scim_users::table
                        .filter(scim_users::customer_id.eq(customer))
                        .filter(scim_users::id.eq(id.as_uuid())),
                )
                .execute(conn)
                .await?;
                writer.end_sessions_of_the_unadmitted(conn).await?;
                Ok(())
            })
            .await;
        settle(outcome, || {
            Error::internal("a delete met a unique constraint")
        })
    }

    async fn list_scim_users(
        &self,
        scope: CustomerScope,
        filter: Option<&UserFilter>,
        window: ListWindow,
    ) -> Result<ListPage<ScimUser>> {
        let customer = scope.customer_id().as_uuid();
        let filtered = || {
            let mut query = scim_users::table
                .filter(scim_users::customer_id.eq(customer))
                .into_boxed();
            for clause in filter.map(|f| f.0.as_slice()).unwrap_or_default() {
                query = match clause {
                    MatchOn::Id(Some(id)) => query.filter(scim_users::id.eq(*id)),
                    MatchOn::UserName(key) => {
                        query.filter(scim_users::user_name_key.eq(key.clone()))
                    }
                    MatchOn::ExternalId(v) => query.filter(scim_users::external_id.eq(v.clone())),
                    MatchOn::DisplayName(v) => query.filter(scim_users::display_name.eq(v.clone())),
                    MatchOn::Active(v) => query.filter(scim_users::active.eq(*v)),
                    // Not a UUID, or not a user's attribute: matches nothing.
                    MatchOn::Id(None) | MatchOn::GroupName(_) | MatchOn::Member(_) => {
                        query.filter(diesel::dsl::sql::<diesel::sql_types::Bool>("false"))
                    }
                };
            }
            query
        };
        let mut conn = self.conn().await?;
        let total: i64 = filtered()
            .count()
            .get_result(&mut conn)
            .await
            .map_err(db_error)?;
        let rows: Vec<UserRow> = if window.count == 0 {
            Vec::new()
        } else {
            filtered()
                .order(scim_users::id)
                .offset(i64::try_from(window.offset()).unwrap_or(i64::MAX))
                .limit(i64::from(window.count))
                .select(UserRow::as_select())
                .load(&mut conn)
                .await
                .map_err(db_error)?
        };
        Ok(ListPage {
            resources: rows
                .into_iter()
                .map(ScimUser::try_from)
                .collect::<Result<_>>()?,
            total: u64::try_from(total).unwrap_or_default(),
        })
    }

    async fn create_scim_group(
        &self,
        scope: CustomerScope,
        by: KeyId,
        group: &GroupAttributes,
    ) -> Result<ScimGroup> {
        groups::create(self, scope, by, group).await
    }

    async fn scim_group(
        &self,
        scope: CustomerScope,
        id: ScimGroupId,
        members: bool,
    ) -> Result<Option<ScimGroup>> {
        let mut conn = self.conn().await?;
        groups::read(&mut conn, scope.customer_id().as_uuid(), id, members)
            .await
            .map_err(db_error)
    }

    async fn scim_group_preview(
        &self,
        scope: CustomerScope,
        id: ScimGroupId,
        limit: u32,
    ) -> Result<Option<(ScimGroup, u64)>> {
        let mut conn = self.conn().await?;
        let customer = scope.customer_id().as_uuid();
        let Some(mut group) = groups::read(&mut conn, customer, id, false)
            .await
            .map_err(db_error)?
        else {
            return Ok(None);
        };
        let (members, total) = members::first(&mut conn, customer, id, limit)
            .await
            .map_err(db_error)?;
        group.members = Some(members);
        Ok(Some((group, total)))
    }

    async fn replace_scim_group(
        &self,
        scope: CustomerScope,
        by: KeyId,
        id: ScimGroupId,
        group: &GroupAttributes,
        expected: Option<&[u64]>,
    ) -> Result<ScimGroup> {
        let patch = GroupPatch {
            display_name: Some(group.display_name.clone()),
            external_id: Some(group.external_id.clone()),
            members: vec![posture_domain::scim::MemberChange::Replace(
                group.members.clone(),
            )],
        };
        groups::patch(self, scope, by, id, &patch, expected, true).await
    }

    async fn patch_scim_group(
        &self,
        scope: CustomerScope,
        by: KeyId,
        id: ScimGroupId,
        patch: &GroupPatch,
        expected: Option<&[u64]>,
        members: bool,
    ) -> Result<ScimGroup> {
        groups::patch(self, scope, by, id, patch, expected, members).await
    }

    async fn delete_scim_group(
        &self,
        scope: CustomerScope,
        by: KeyId,
        id: ScimGroupId,
        expected: Option<&[u64]>,
    ) -> Result<()> {
        groups::delete(self, scope, by, id, expected).await
    }

    async fn list_scim_groups(
        &self,
        scope: CustomerScope,
        filter: Option<&GroupFilter>,
        window: ListWindow,
        members: bool,
    ) -> Result<ListPage<ScimGroup>> {
        groups::list(self, scope, filter, window, members).await
    }
}
