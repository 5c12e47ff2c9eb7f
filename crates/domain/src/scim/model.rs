//! The resources and their bounds: users, groups, their attributes and metadata, and a
//! list's window and page.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{
    Error, Result,
    ids::{ScimGroupId, ScimUserId},
};

/// Users a customer may have provisioned.
pub const MAX_USERS: u64 = 100_000;
/// Groups a customer may have provisioned.
pub const MAX_GROUPS: u64 = 10_000;
/// Members one group may have.
pub const MAX_MEMBERS: u64 = 100_000;
/// Longest name, id or e-mail address kept (characters).
pub const MAX_TEXT: usize = 256;
/// E-mail addresses kept of one user.
pub const MAX_EMAILS: usize = 10;
/// Operations of one PATCH.
pub const MAX_OPERATIONS: usize = 1_000;
/// Members one list answer shows, all its groups together (a single group's read shows all
/// of its members, up to [`MAX_MEMBERS`]).
pub const MAX_MEMBERS_LISTED: u64 = 10_000;
/// Members named by one request (a group's creation, replacement or PATCH).
pub const MAX_MEMBERS_PER_REQUEST: usize = 1_000;
/// Writes (creations, replacements, changes, deletions of users and groups) a customer's
/// provisioning keys may make together: 600 a minute (an identity provider's first cycle of
/// 100,000 users in under three hours). Each write adds a line to the customer's audit log.
pub const WRITE_RATE: crate::rate_limit::RatePolicy = crate::rate_limit::RatePolicy {
    limit: 600,
    window_secs: 60,
};
/// Resources of one list page (`count`); the default when `count` is absent.
pub const MAX_PAGE: u32 = 500;
pub const DEFAULT_PAGE: u32 = 100;

/// A user's name (RFC 7643 §4.1.1), as far as posture keeps it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PersonName {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formatted: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_name: Option<String>,
}

impl PersonName {
    pub(super) fn is_empty(&self) -> bool {
        self.formatted.is_none() && self.family_name.is_none() && self.given_name.is_none()
    }
}

/// One of a user's e-mail addresses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Email {
    pub value: String,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
}

/// What posture keeps of a user besides its columns (stored as one JSON document).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserExtras {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<PersonName>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub emails: Vec<Email>,
}

/// A user's attributes, as the identity provider sets them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserAttributes {
    pub user_name: String,
    pub external_id: Option<String>,
    pub display_name: Option<String>,
    pub extras: UserExtras,
    /// `None` when the identity provider leaves it unassigned: only `Some(false)`
    /// deactivates ([`UserAttributes::is_active`]).
    pub active: Option<bool>,
}

impl UserAttributes {
    /// A user of this name, active, with nothing else set.
    pub fn named(user_name: impl Into<String>) -> Self {
        Self {
            user_name: user_name.into(),
            external_id: None,
            display_name: None,
            extras: UserExtras::default(),
            active: None,
        }
    }

    /// Whether the user is active: unless the identity provider said `active: false`.
    pub fn is_active(&self) -> bool {
        self.active != Some(false)
    }

    /// The rules a user must meet to be kept: a `userName`, every text within
    /// [`MAX_TEXT`], at most [`MAX_EMAILS`] addresses, one primary at most.
    /// The rules of a user as it is kept (a name written before posture refused invisible
    /// characters passes: see [`UserAttributes::validate_name`]).
    pub fn validate(&self) -> Result<()> {
        required_text("userName", &self.user_name)?;
        optional_text("externalId", self.external_id.as_deref())?;
        optional_text("displayName", self.display_name.as_deref())?;
        if let Some(name) = &self.extras.name {
            optional_text("name.formatted", name.formatted.as_deref())?;
            optional_text("name.familyName", name.family_name.as_deref())?;
            optional_text("name.givenName", name.given_name.as_deref())?;
        }
        if self.extras.emails.len() > MAX_EMAILS {
            return Err(Error::invalid(
                "emails",
                format!("at most {MAX_EMAILS} addresses are kept"),
            ));
        }
        for email in &self.extras.emails {
            required_text("emails.value", &email.value)?;
            optional_text("emails.type", email.kind.as_deref())?;
        }
        if self
            .extras
            .emails
            .iter()
            .filter(|e| e.primary == Some(true))
            .count()
            > 1
        {
            return Err(Error::invalid("emails", "at most one address is primary"));
        }
        Ok(())
    }

    /// The rules of a `userName` being written: it must read as what it is ([`plainly_visible`]).
    /// A PATCH that leaves a stored name alone does not check it, so a user whose name was
    /// kept before this rule can still be deactivated.
    pub fn validate_name(&self) -> Result<()> {
        plainly_visible("userName", &self.user_name)
    }

    /// The lowercased `userName` that is unique per customer.
    pub fn user_name_key(&self) -> String {
        user_name_key(&self.user_name)
    }

    /// What a group shows of this user as a member.
    pub fn member_display(&self) -> &str {
        self.display_name.as_deref().unwrap_or(&self.user_name)
    }
}

/// A group's attributes, as the identity provider sets them (members by id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupAttributes {
    pub display_name: String,
    pub external_id: Option<String>,
    pub members: Vec<ScimUserId>,
}

impl GroupAttributes {
    pub fn validate(&self) -> Result<()> {
        required_text("displayName", &self.display_name)?;
        optional_text("externalId", self.external_id.as_deref())?;
        if self.members.len() > MAX_MEMBERS_PER_REQUEST {
            return Err(Error::invalid(
                "members",
                format!(
                    "at most {MAX_MEMBERS_PER_REQUEST} members per request; add more with PATCH"
                ),
            ));
        }
        Ok(())
    }
}

/// A `userName` as compared (case-insensitively, RFC 7643 §4.1.1): the key of its
/// uniqueness, and what a console sign-in is matched by. Only ASCII letters are folded;
/// every other character is compared exactly, so no look-alike (the KELVIN SIGN, a
/// fullwidth letter) folds into an ASCII name and signs in as its holder.
pub fn user_name_key(user_name: &str) -> String {
    user_name.to_ascii_lowercase()
}

/// A group's name as compared (case-insensitively, as [`user_name_key`]): the key of its
/// uniqueness, and what the console's admin group is matched by.
pub fn group_name_key(display_name: &str) -> String {
    display_name.to_ascii_lowercase()
}

/// A `userName` must read as what it is: no invisible (format) characters — zero-width,
/// bidirectional controls, a soft hyphen — no space but single spaces between other
/// characters, so two names never differ by what a person cannot see.
fn plainly_visible(field: &'static str, value: &str) -> Result<()> {
    if value.chars().any(crate::outside::is_invisible) {
        return Err(Error::invalid(
            field,
            "must not contain invisible characters (zero-width, bidirectional controls)",
        ));
    }
    let spaced_oddly = value.starts_with(char::is_whitespace)
        || value.ends_with(char::is_whitespace)
        || value.contains("  ")
        || value.chars().any(|c| c.is_whitespace() && c != ' ');
    if spaced_oddly {
        return Err(Error::invalid(
            field,
            "must not start or end with a space, nor hold other spaces than single ones",
        ));
    }
    Ok(())
}

/// Creation, modification and version of a resource (`meta`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub created: DateTime<Utc>,
    pub modified: DateTime<Utc>,
    /// Raised by every change; `meta.version` and the ETag are made of it.
    pub version: u64,
}

/// A provisioned user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScimUser {
    pub id: ScimUserId,
    pub attributes: UserAttributes,
    pub meta: Meta,
}

/// One member of a group, as a group shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub user: ScimUserId,
    /// The user's `displayName`, or its `userName` without one.
    pub display: String,
}

/// A provisioned group; `members` is `None` when the request left them out
/// (`excludedAttributes=members`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScimGroup {
    pub id: ScimGroupId,
    pub display_name: String,
    pub external_id: Option<String>,
    pub members: Option<Vec<Member>>,
    pub meta: Meta,
}

/// Where a list page starts and how long it is (`startIndex` is 1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListWindow {
    pub start_index: u32,
    pub count: u32,
}

impl ListWindow {
    /// The window a request asks for: `startIndex` below 1 is 1 (RFC 7644 §3.4.2.4),
    /// `count` is clamped to [`MAX_PAGE`] (a negative one is 0).
    pub fn new(start_index: Option<i64>, count: Option<i64>) -> Self {
        let start_index = start_index.unwrap_or(1).clamp(1, i64::from(u32::MAX));
        let count = count
            .unwrap_or(i64::from(DEFAULT_PAGE))
            .clamp(0, i64::from(MAX_PAGE));
        Self {
            start_index: u32::try_from(start_index).unwrap_or(u32::MAX),
            count: u32::try_from(count).unwrap_or(MAX_PAGE),
        }
    }

    /// Rows to skip.
    pub fn offset(&self) -> u64 {
        u64::from(self.start_index) - 1
    }
}

/// One page of a list and how many match in all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListPage<T> {
    pub resources: Vec<T>,
    pub total: u64,
}

pub(super) fn required_text(field: &'static str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    optional_text(field, Some(value))
}

pub(super) fn optional_text(field: &'static str, value: Option<&str>) -> Result<()> {
    match value {
        Some(v) if v.chars().count() > MAX_TEXT => Err(Error::invalid(
            field,
            format!("must be at most {MAX_TEXT} characters"),
        )),
        Some(v) if v.chars().any(char::is_control) => {
            Err(Error::invalid(field, "must not contain control characters"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_needs_a_name_within_bounds() {
        assert!(UserAttributes::named("ada@example.com").validate().is_ok());
        assert!(UserAttributes::named(" ").validate().is_err());
        assert!(UserAttributes::named("a".repeat(257)).validate().is_err());
        assert!(UserAttributes::named("a\nb").validate().is_err());
    }

    #[test]
    fn look_alikes_never_fold_into_an_ascii_name() {
        assert_eq!(
            user_name_key("Kate@Contoso.example"),
            "kate@contoso.example"
        );
        // KELVIN SIGN, fullwidth k, Cyrillic a: other names, whatever their case.
        for look_alike in [
            "\u{212a}ate@contoso.example",
            "\u{ff4b}ate@contoso.example",
            "k\u{0430}te@contoso.example",
        ] {
            assert_ne!(
                user_name_key(look_alike),
                "kate@contoso.example",
                "{look_alike}"
            );
        }
        assert_eq!(group_name_key("Posture-Admins"), "posture-admins");
        assert_ne!(group_name_key("Posture-\u{0391}dmins"), "posture-admins");
    }

    #[test]
    fn a_user_name_differing_only_by_what_cannot_be_seen_is_refused() {
        for hidden in [
            "kate@contoso.example\u{200b}",
            "ka\u{200d}te@contoso.example",
            "\u{202e}kate@contoso.example",
            "kate\u{00ad}@contoso.example",
            "\u{feff}kate@contoso.example",
            " kate@contoso.example",
            "kate@contoso.example ",
            "kate  lovelace",
            "kate\u{00a0}lovelace",
            "kate\u{3000}lovelace",
        ] {
            let error = UserAttributes::named(hidden).validate_name().unwrap_err();
            assert!(
                matches!(&error, Error::Invalid { field, .. } if field == "userName"),
                "{hidden:?}: {error:?}"
            );
        }
        assert!(
            UserAttributes::named("Kate Lovelace")
                .validate_name()
                .is_ok()
        );
        assert!(
            UserAttributes::named("kåte@contoso.example")
                .validate_name()
                .is_ok()
        );
    }

    #[test]
    fn a_user_has_one_primary_address_at_most() {
        let mut user = UserAttributes::named("ada");
        let email = |primary| Email {
            value: "ada@example.com".into(),
            kind: None,
            primary,
        };
        user.extras.emails = vec![email(Some(true)), email(Some(true))];
        assert!(user.validate().is_err());
        user.extras.emails = vec![email(Some(true)), email(Some(false)), email(None)];
        assert!(user.validate().is_ok());
        user.extras.emails = vec![email(None); MAX_EMAILS + 1];
        assert!(user.validate().is_err());
    }

    #[test]
    fn a_window_starts_at_one_and_is_clamped() {
        assert_eq!(
            ListWindow::new(None, None),
            ListWindow {
                start_index: 1,
                count: DEFAULT_PAGE
            }
        );
        assert_eq!(
            ListWindow::new(Some(-5), Some(-1)),
            ListWindow {
                start_index: 1,
                count: 0
            }
        );
        assert_eq!(ListWindow::new(Some(11), Some(10_000)).count, MAX_PAGE);
        assert_eq!(ListWindow::new(Some(11), None).offset(), 10);
    }
}
