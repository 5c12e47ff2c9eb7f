//! SCIM 2.0 (RFC 7643, RFC 7644): the users and groups a customer's identity provider
//! provisions with a `provision:scim` key.
//!
//! posture keeps the attributes it uses and says so in its schemas: a user's `userName`
//! (unique per customer, case-insensitively), `externalId`, `displayName`, `name`, `emails`
//! and `active`; a group's `displayName` (unique per customer, case-insensitively),
//! `externalId` and `members` (users only). Other attributes an identity provider sends are
//! accepted and not kept (`resource.rs`). `model.rs` holds the resources and their bounds,
//! `filter.rs` reads the list filters, `patch.rs` applies PATCH operations.

mod filter;
mod model;
mod patch;
mod resource;

pub use crate::ids::{ScimGroupId, ScimUserId};
pub use filter::{GroupFilter, MatchOn, UserFilter};
pub use model::{
    DEFAULT_PAGE, Email, GroupAttributes, ListPage, ListWindow, MAX_EMAILS, MAX_GROUPS,
    MAX_MEMBERS, MAX_MEMBERS_LISTED, MAX_MEMBERS_PER_REQUEST, MAX_OPERATIONS, MAX_PAGE, MAX_TEXT,
    MAX_USERS, Member, Meta, PersonName, ScimGroup, ScimUser, UserAttributes, UserExtras,
    WRITE_RATE, group_name_key, user_name_key,
};
pub use patch::{GroupPatch, MemberChange, PatchOperation, PatchRequest, apply_user_patch};
pub use resource::{group_from_resource, user_from_resource};
