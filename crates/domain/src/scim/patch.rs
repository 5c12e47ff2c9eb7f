//! PATCH (RFC 7644 §3.5.2) as identity providers send it: `op` in any case (Entra ID sends
//! `"Replace"`), with or without `path` (without one, `value` is an object of attributes,
//! whose keys may be dotted: `name.givenName`), booleans as strings, and the paths
//! `emails[type eq "work"].value` and `members[value eq "<id>"]`. A user's operations are
//! applied to the user read (and written back whole); a group's become a [`GroupPatch`] of
//! its name and member changes, applied without reading its members.

use serde::Deserialize;
use serde_json::Value;

use super::{
    Email, MAX_OPERATIONS, ScimUserId, UserAttributes,
    resource::{
        GROUP_URN, SIMPLE_USER_ATTRIBUTES, USER_URN, attributes, checked_name, email, emails,
        is_schema, member_ids, set_user_attribute, text,
    },
};
use crate::{Error, Result};

/// The body of a PATCH.
#[derive(Clone, Debug, Deserialize)]
pub struct PatchRequest {
    #[serde(rename = "Operations", alias = "operations")]
    pub operations: Vec<PatchOperation>,
}

/// One operation.
#[derive(Clone, Debug, Deserialize)]
pub struct PatchOperation {
    pub op: String,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub value: Option<Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Replace,
    Remove,
}

impl PatchRequest {
    /// The operations, within [`MAX_OPERATIONS`] and not none.
    fn checked(&self) -> Result<&[PatchOperation]> {
        if self.operations.is_empty() {
            return Err(Error::invalid(
                "Operations",
                "must name at least one operation",
            ));
        }
        if self.operations.len() > MAX_OPERATIONS {
            return Err(Error::invalid(
                "Operations",
                format!("at most {MAX_OPERATIONS} operations per request"),
            ));
        }
        Ok(&self.operations)
    }
}

impl PatchOperation {
    fn op(&self) -> Result<Op> {
        match self.op.to_ascii_lowercase().as_str() {
            "add" => Ok(Op::Add),
            "replace" => Ok(Op::Replace),
            "remove" => Ok(Op::Remove),
            _ => Err(Error::invalid("op", "is add, replace or remove")),
        }
    }

    fn value(&self) -> Result<&Value> {
        self.value
            .as_ref()
            .ok_or_else(|| Error::invalid("value", "is required by add and replace"))
    }

    /// The path, if any (an empty one is none, and so is the core schema's URN itself: its
    /// value is an object of attributes, as without a path).
    fn path(&self, urn: &str) -> Result<Option<Path>> {
        match self.path.as_deref().map(str::trim) {
            None | Some("") => Ok(None),
            Some(path) if is_schema(path, urn) => Ok(None),
            Some(path) => Path::parse(path, urn).map(Some),
        }
    }
}

/// A PATCH path: `attribute`, `attribute.sub`, `attribute[key eq "value"]` or
/// `attribute[key eq "value"].sub` (names lowercased).
#[derive(Debug, PartialEq, Eq)]
struct Path {
    attribute: String,
    select: Option<(String, String)>,
    sub: Option<String>,
}

impl Path {
    fn parse(path: &str, urn: &str) -> Result<Self> {
        let invalid = || {
            Error::invalid(
                "path",
                "is `attribute`, `attribute.sub` or `attribute[sub eq \"value\"]`",
            )
        };
        if path.len() > 512 {
            return Err(invalid());
        }
        let name = checked_name(path, urn)?;
        let Some((attribute, rest)) = name.split_once('[') else {
            // `name.givenName`; a schema URN (an extension's attribute) has dots of its own.
            return Ok(match name.split_once('.') {
                Some((attribute, sub)) if !name.starts_with("urn:") => Self {
                    attribute: attribute.to_owned(),
                    select: None,
                    sub: Some(sub.to_owned()),
                },
                _ => Self {
                    attribute: name,
                    select: None,
                    sub: None,
                },
            });
        };
        let (filter, after) = rest.split_once(']').ok_or_else(invalid)?;
        let sub = match after {
            "" => None,
            s => Some(s.strip_prefix('.').ok_or_else(invalid)?.to_owned()),
        };
        // The filter's value keeps its case: take it from the original path.
        let (key, rest) = filter
            .trim()
            .split_once(char::is_whitespace)
            .ok_or_else(invalid)?;
        let (operator, _) = rest
            .trim_start()
            .split_once(char::is_whitespace)
            .ok_or_else(invalid)?;
        if !operator.eq_ignore_ascii_case("eq") {
            return Err(invalid());
        }
        let open = path.find('[').ok_or_else(invalid)?;
        let close = path.rfind(']').ok_or_else(invalid)?;
        let original = &path[open + 1..close];
        let quoted = original
            .trim()
            .splitn(3, char::is_whitespace)
            .nth(2)
            .ok_or_else(invalid)?;
        let value: String = serde_json::from_str(quoted.trim()).map_err(|_| invalid())?;
        Ok(Self {
            attribute: attribute.to_owned(),
            select: Some((key.to_owned(), value)),
            sub,
        })
    }
}

/// Applies a PATCH to a user; the result is checked as a whole.
pub fn apply_user_patch(user: &mut UserAttributes, request: &PatchRequest) -> Result<()> {
    let named = user.user_name.clone();
    for operation in request.checked()? {
        let op = operation.op()?;
        match (op, operation.path(USER_URN)?) {
            (Op::Remove, None) => {
                return Err(Error::invalid(
                    "target",
                    "remove needs a path naming what it removes",
                ));
            }
            (_, None) => {
                let value = operation.value()?;
                let object = value.as_object().ok_or_else(|| {
                    Error::invalid("value", "without a path is an object of attributes")
                })?;
                for (name, key, value) in attributes(object, USER_URN)? {
                    // Entra ID may send `emails[type eq "work"].value` as a key; `emails`
                    // itself is added to, or replaced, as with its path (RFC 7644 §3.5.2.1:
                    // an `add` of a multi-valued attribute adds its values).
                    if name == "emails"
                        || name.starts_with("emails[")
                        || name.starts_with("emails.")
                    {
                        let path = Path::parse(key, USER_URN)?;
                        patch_emails(&mut user.extras.emails, op, &path, Some(value))?;
                    } else {
                        set_user_attribute(user, &name, value, true)?;
                    }
                }
            }
            (op, Some(path)) if path.attribute == "emails" => {
                patch_emails(&mut user.extras.emails, op, &path, operation.value.as_ref())?;
            }
            // A selection in a single value posture keeps selects nothing it could change.
            (_, Some(path))
                if path.select.is_some()
                    && (SIMPLE_USER_ATTRIBUTES.contains(&path.attribute.as_str())
                        || path.attribute == "name") =>
            {
                return Err(Error::invalid(
                    "path",
                    format!(
                        "{} is a single value: a path selects none of it",
                        path.attribute
                    ),
                ));
            }
            // A selection in an attribute posture does not keep: nothing to change.
            (_, Some(path)) if path.select.is_some() => {}
            (Op::Remove, Some(path)) => {
                let name = dotted(&path);
                if name == "username" {
                    return Err(Error::invalid(
                        "userName",
                        "is required and cannot be removed",
                    ));
                }
                set_user_attribute(user, &name, &Value::Null, true)?;
            }
            (_, Some(path)) => {
                set_user_attribute(user, &dotted(&path), operation.value()?, true)?;
            }
        }
    }
    user.validate()?;
    if user.user_name != named {
        user.validate_name()?;
    }
    Ok(())
}

fn dotted(path: &Path) -> String {
    match &path.sub {
        Some(sub) => format!("{}.{sub}", path.attribute),
        None => path.attribute.clone(),
    }
}

/// `emails`, `emails[type eq "work"]` and `emails[type eq "work"].value`.
fn patch_emails(list: &mut Vec<Email>, op: Op, path: &Path, value: Option<&Value>) -> Result<()> {
    let required =
        || value.ok_or_else(|| Error::invalid("value", "is required by add and replace"));
    let Some((key, wanted)) = &path.select else {
        match (op, path.sub.as_deref()) {
            (Op::Remove, _) => list.clear(),
            (Op::Add, None) => list.extend(emails(required()?)?),
            (Op::Replace, None) => *list = emails(required()?)?,
            (_, Some(_)) => {
                return Err(Error::invalid(
                    "path",
                    "emails has sub-attributes only under a selection: emails[type eq \"work\"].value",
                ));
            }
        }
        return Ok(());
    };
    let matches = |e: &Email| match key.as_str() {
        "type" => e.kind.as_deref() == Some(wanted.as_str()),
        "value" => e.value.eq_ignore_ascii_case(wanted),
        _ => false,
    };
    if !matches!(key.as_str(), "type" | "value") {
        return Err(Error::invalid(
            "path",
            "emails are selected by type or value",
        ));
    }
    if op == Op::Remove {
        list.retain(|e| !matches(e));
        return Ok(());
    }
    let value = required()?;
    let position = match list.iter().position(matches) {
        Some(i) => i,
        None => {
            let mut new = Email {
                value: String::new(),
                kind: None,
                primary: None,
            };
            match key.as_str() {
                "type" => new.kind = Some(wanted.clone()),
                _ => new.value = wanted.clone(),
            }
            list.push(new);
            list.len() - 1
        }
    };
    let entry = &mut list[position];
    match path.sub.as_deref() {
        None => *entry = email(value)?,
        Some("value") => entry.value = text("emails.value", value)?.unwrap_or_default(),
        Some("type") => entry.kind = text("emails.type", value)?,
        Some("primary") => entry.primary = super::resource::boolean("emails.primary", value)?,
        Some(_) => {
            return Err(Error::invalid(
                "path",
                "an e-mail address has value, type and primary",
            ));
        }
    }
    Ok(())
}

/// A group's changes from one PATCH, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupPatch {
    pub display_name: Option<String>,
    /// `Some(None)` removes it.
    pub external_id: Option<Option<String>>,
    pub members: Vec<MemberChange>,
}

/// One change of a group's members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberChange {
    Add(Vec<ScimUserId>),
    Remove(Vec<ScimUserId>),
    RemoveAll,
    Replace(Vec<ScimUserId>),
}

impl GroupPatch {
    /// The changes a PATCH of a group asks for.
    pub fn from_request(request: &PatchRequest) -> Result<Self> {
        let mut patch = GroupPatch::default();
        for operation in request.checked()? {
            let op = operation.op()?;
            match (op, operation.path(GROUP_URN)?) {
                (Op::Remove, None) => {
                    return Err(Error::invalid(
                        "target",
                        "remove needs a path naming what it removes",
                    ));
                }
                (op, None) => {
                    let value = operation.value()?;
                    let object = value.as_object().ok_or_else(|| {
                        Error::invalid("value", "without a path is an object of attributes")
                    })?;
                    for (name, _, value) in attributes(object, GROUP_URN)? {
                        patch.set(op, &name, Some(value))?;
                    }
                }
                (
                    Op::Remove,
                    Some(Path {
                        attribute,
                        select: Some((key, value)),
                        sub: None,
                    }),
                ) if attribute == "members" && key == "value" => {
                    let id = value.parse::<ScimUserId>().map_err(|_| {
                        Error::invalid("members", "a member's value is a user's id")
                    })?;
                    patch.members.push(MemberChange::Remove(vec![id]));
                }
                (
                    _,
                    Some(
                        Path {
                            select: Some(_), ..
                        }
                        | Path { sub: Some(_), .. },
                    ),
                ) => {
                    return Err(Error::invalid(
                        "path",
                        "a group's paths are displayName, externalId, members and members[value eq \"<id>\"]",
                    ));
                }
                (op, Some(path)) => patch.set(op, &path.attribute, operation.value.as_ref())?,
            }
        }
        let named: usize = patch
            .members
            .iter()
            .map(|c| match c {
                MemberChange::Add(ids) | MemberChange::Remove(ids) | MemberChange::Replace(ids) => {
                    ids.len()
                }
                MemberChange::RemoveAll => 0,
            })
            .sum();
        if let Some(name) = &patch.display_name {
            super::model::required_text("displayName", name)?;
        }
        if let Some(external_id) = &patch.external_id {
            super::model::optional_text("externalId", external_id.as_deref())?;
        }
        if named > super::MAX_MEMBERS_PER_REQUEST {
            return Err(Error::invalid(
                "members",
                format!(
                    "at most {} members per request",
                    super::MAX_MEMBERS_PER_REQUEST
                ),
            ));
        }
        Ok(patch)
    }

    fn set(&mut self, op: Op, attribute: &str, value: Option<&Value>) -> Result<()> {
        let required =
            || value.ok_or_else(|| Error::invalid("value", "is required by add and replace"));
        match (attribute, op) {
            ("displayname", Op::Remove) => {
                return Err(Error::invalid(
                    "displayName",
                    "is required and cannot be removed",
                ));
            }
            ("displayname", _) => {
                self.display_name = Some(
                    text("displayName", required()?)?
                        .ok_or_else(|| Error::invalid("displayName", "must not be empty"))?,
                );
            }
            ("externalid", Op::Remove) => self.external_id = Some(None),
            ("externalid", _) => self.external_id = Some(text("externalId", required()?)?),
            ("members", Op::Add) => self
                .members
                .push(MemberChange::Add(member_ids(required()?)?)),
            ("members", Op::Replace) => {
                self.members
                    .push(MemberChange::Replace(member_ids(required()?)?));
            }
            // Entra ID removes members with `path: members` and the members as the value.
            ("members", Op::Remove) => self.members.push(match value {
                Some(value) if !value.is_null() => MemberChange::Remove(member_ids(value)?),
                _ => MemberChange::RemoveAll,
            }),
            (name, _)
                if name.starts_with("members.")
                    || name.starts_with("members[")
                    || name.starts_with("displayname.")
                    || name.starts_with("externalid.") =>
            {
                return Err(Error::invalid(
                    "path",
                    "a group's paths are displayName, externalId, members and members[value eq \"<id>\"]",
                ));
            }
            // `id`, `schemas`, `meta` and attributes not kept.
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
