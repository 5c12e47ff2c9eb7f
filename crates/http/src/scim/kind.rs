//! What `/Users` and `/Groups` differ in — their path, attributes, store calls and
//! rendering — so that one set of handlers (`handlers.rs`) serves both. Only PATCH, whose
//! meaning differs (a user's attributes applied and written whole, a group's member changes
//! written as statements), stays in `users.rs` and `groups.rs`.

use posture_domain::{
    CustomerScope, KeyId, Result,
    ports::ScimRepository,
    scim::{
        GroupAttributes, GroupFilter, ListPage, ListWindow, ScimGroup, ScimGroupId, ScimUser,
        ScimUserId, UserAttributes, UserFilter, group_from_resource, user_from_resource,
    },
};
use serde_json::Value;

use super::{ScimError, exchange::Shape, render};

/// A kind of SCIM resource.
pub(super) trait Kind: 'static {
    type Resource;
    type Id: Copy;
    type Attributes;
    type Filter;

    /// The id of a path; one that is not a UUID names nothing (404).
    fn id(text: &str) -> std::result::Result<Self::Id, ScimError>;
    fn attributes(body: &Value) -> std::result::Result<Self::Attributes, ScimError>;
    fn filter(text: &str) -> std::result::Result<Self::Filter, ScimError>;
    fn version(resource: &Self::Resource) -> u64;
    fn render(resource: &Self::Resource, base: &str) -> Value;

    async fn create(
        scim: &dyn ScimRepository,
        by: (CustomerScope, KeyId),
        attributes: &Self::Attributes,
    ) -> Result<Self::Resource>;
    /// The resource, with what `shape` asks for (a group's members only when shown).
    async fn read(
        scim: &dyn ScimRepository,
        scope: CustomerScope,
        id: Self::Id,
        shape: &Shape,
    ) -> Result<Option<Self::Resource>>;
    async fn replace(
        scim: &dyn ScimRepository,
        by: (CustomerScope, KeyId),
        id: Self::Id,
        attributes: &Self::Attributes,
        expected: Option<&[u64]>,
    ) -> Result<Self::Resource>;
    async fn delete(
        scim: &dyn ScimRepository,
        by: (CustomerScope, KeyId),
        id: Self::Id,
        expected: Option<&[u64]>,
    ) -> Result<()>;
    async fn page(
        scim: &dyn ScimRepository,
        scope: CustomerScope,
        filter: Option<&Self::Filter>,
        window: ListWindow,
        shape: &Shape,
    ) -> Result<ListPage<Self::Resource>>;
}

/// `/Users`.
pub(super) struct Users;

impl Kind for Users {
    type Resource = ScimUser;
    type Id = ScimUserId;
    type Attributes = UserAttributes;
    type Filter = UserFilter;

    fn id(text: &str) -> std::result::Result<ScimUserId, ScimError> {
        text.parse().map_err(|_| ScimError::not_found())
    }

    fn attributes(body: &Value) -> std::result::Result<UserAttributes, ScimError> {
        Ok(user_from_resource(body)?)
    }

    fn filter(text: &str) -> std::result::Result<UserFilter, ScimError> {
        Ok(text.parse()?)
    }

    fn version(user: &ScimUser) -> u64 {
        user.meta.version
    }

    fn render(user: &ScimUser, base: &str) -> Value {
        render::user(user, base)
    }

    async fn create(
        scim: &dyn ScimRepository,
        (scope, by): (CustomerScope, KeyId),
        attributes: &UserAttributes,
    ) -> Result<ScimUser> {
        scim.create_scim_user(scope, by, attributes).await
    }

    async fn read(
        scim: &dyn ScimRepository,
        scope: CustomerScope,
        id: ScimUserId,
        _: &Shape,
    ) -> Result<Option<ScimUser>> {
        scim.scim_user(scope, id).await
    }

    async fn replace(
        scim: &dyn ScimRepository,
        (scope, by): (CustomerScope, KeyId),
        id: ScimUserId,
        attributes: &UserAttributes,
        expected: Option<&[u64]>,
    ) -> Result<ScimUser> {
        scim.replace_scim_user(scope, by, id, attributes, expected)
            .await
    }

    async fn delete(
        scim: &dyn ScimRepository,
        (scope, by): (CustomerScope, KeyId),
        id: ScimUserId,
        expected: Option<&[u64]>,
    ) -> Result<()> {
        scim.delete_scim_user(scope, by, id, expected).await
    }

    async fn page(
        scim: &dyn ScimRepository,
        scope: CustomerScope,
        filter: Option<&UserFilter>,
        window: ListWindow,
        _: &Shape,
    ) -> Result<ListPage<ScimUser>> {
        scim.list_scim_users(scope, filter, window).await
    }
}

/// `/Groups`: a group's members are read only when the answer shows them.
pub(super) struct Groups;

impl Kind for Groups {
    type Resource = ScimGroup;
    type Id = ScimGroupId;
    type Attributes = GroupAttributes;
    type Filter = GroupFilter;

    fn id(text: &str) -> std::result::Result<ScimGroupId, ScimError> {
        text.parse().map_err(|_| ScimError::not_found())
    }

    fn attributes(body: &Value) -> std::result::Result<GroupAttributes, ScimError> {
        Ok(group_from_resource(body)?)
    }

    fn filter(text: &str) -> std::result::Result<GroupFilter, ScimError> {
        Ok(text.parse()?)
    }

    fn version(group: &ScimGroup) -> u64 {
        group.meta.version
    }

    fn render(group: &ScimGroup, base: &str) -> Value {
        render::group(group, base)
    }

    async fn create(
        scim: &dyn ScimRepository,
        (scope, by): (CustomerScope, KeyId),
        attributes: &GroupAttributes,
    ) -> Result<ScimGroup> {
        scim.create_scim_group(scope, by, attributes).await
    }

    async fn read(
        scim: &dyn ScimRepository,
        scope: CustomerScope,
        id: ScimGroupId,
        shape: &Shape,
    ) -> Result<Option<ScimGroup>> {
        scim.scim_group(scope, id, shape.members()).await
    }

    async fn replace(
        scim: &dyn ScimRepository,
        (scope, by): (CustomerScope, KeyId),
        id: ScimGroupId,
        attributes: &GroupAttributes,
        expected: Option<&[u64]>,
    ) -> Result<ScimGroup> {
        scim.replace_scim_group(scope, by, id, attributes, expected)
            .await
    }

    async fn delete(
        scim: &dyn ScimRepository,
        (scope, by): (CustomerScope, KeyId),
        id: ScimGroupId,
        expected: Option<&[u64]>,
    ) -> Result<()> {
        scim.delete_scim_group(scope, by, id, expected).await
    }

    async fn page(
        scim: &dyn ScimRepository,
        scope: CustomerScope,
        filter: Option<&GroupFilter>,
        window: ListWindow,
        shape: &Shape,
    ) -> Result<ListPage<ScimGroup>> {
        scim.list_scim_groups(scope, filter, window, shape.members())
            .await
    }
}
