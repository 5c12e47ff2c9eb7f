//! The port of SCIM's users and groups.

use async_trait::async_trait;

use crate::{
    customer::CustomerScope,
    error::Result,
    ids::KeyId,
    scim::{
        GroupAttributes, GroupFilter, GroupPatch, ListPage, ListWindow, ScimGroup, ScimGroupId,
        ScimUser, ScimUserId, UserAttributes, UserFilter,
    },
};

/// SCIM's users and groups (`/scim/v2`), each the customer's. Every write is made by a key
/// (`by`) and is a line of the customer's audit log in the same transaction. A write that names a version
/// (`If-Match`) fails with `PreconditionFailed` when the resource has another; a taken
/// `userName` or group name is `Conflict`; a limit reached or a member that is not one of
/// the customer's users is `Invalid`.
#[async_trait]
pub trait ScimRepository: Send + Sync {
    async fn create_scim_user(
        &self,
        scope: CustomerScope,
        by: KeyId,
        user: &UserAttributes,
    ) -> Result<ScimUser>;
    async fn scim_user(&self, scope: CustomerScope, id: ScimUserId) -> Result<Option<ScimUser>>;
    async fn replace_scim_user(
        &self,
        scope: CustomerScope,
        by: KeyId,
        id: ScimUserId,
        user: &UserAttributes,
        expected: Option<&[u64]>,
    ) -> Result<ScimUser>;
    async fn delete_scim_user(
        &self,
        scope: CustomerScope,
        by: KeyId,
        id: ScimUserId,
        expected: Option<&[u64]>,
    ) -> Result<()>;
    async fn list_scim_users(
        &self,
        scope: CustomerScope,
        filter: Option<&UserFilter>,
        window: ListWindow,
    ) -> Result<ListPage<ScimUser>>;
    async fn create_scim_group(
        &self,
        scope: CustomerScope,
        by: KeyId,
        group: &GroupAttributes,
    ) -> Result<ScimGroup>;
    /// The group, with its members unless `members` is false.
    async fn scim_group(
        &self,
        scope: CustomerScope,
        id: ScimGroupId,
        members: bool,
    ) -> Result<Option<ScimGroup>>;
    /// The group with its first `limit` members (in the order [`Self::scim_group`] lists
    /// them), and how many members it has.
    async fn scim_group_preview(
        &self,
        scope: CustomerScope,
        id: ScimGroupId,
        limit: u32,
    ) -> Result<Option<(ScimGroup, u64)>>;
    async fn replace_scim_group(
        &self,
        scope: CustomerScope,
        by: KeyId,
        id: ScimGroupId,
        group: &GroupAttributes,
        expected: Option<&[u64]>,
    ) -> Result<ScimGroup>;
    /// Applies `patch`; the group after it, with its members unless `members` is false.
    async fn patch_scim_group(
        &self,
        scope: CustomerScope,
        by: KeyId,
        id: ScimGroupId,
        patch: &GroupPatch,
        expected: Option<&[u64]>,
        members: bool,
    ) -> Result<ScimGroup>;
    async fn delete_scim_group(
        &self,
        scope: CustomerScope,
        by: KeyId,
        id: ScimGroupId,
        expected: Option<&[u64]>,
    ) -> Result<()>;
    async fn list_scim_groups(
        &self,
        scope: CustomerScope,
        filter: Option<&GroupFilter>,
        window: ListWindow,
        members: bool,
    ) -> Result<ListPage<ScimGroup>>;
}
