//! Reading a User or Group resource (a POST or PUT body, a PATCH value) into what posture
//! keeps. Attribute names are case-insensitive and may carry the core schema's URN
//! (RFC 7643 §2.1); `null` unassigns (§2.5); `active` may be a boolean or, as Microsoft
//! Entra ID sends it, the string `"True"`/`"False"`. Attributes posture does not keep
//! (`title`, `addresses`, the enterprise extension, ...) are accepted and dropped: an
//! identity provider's default mappings send them, and refusing them would stop its
//! provisioning.

use serde_json::{Map, Value};

use super::{
    Email, GroupAttributes, MAX_MEMBERS_PER_REQUEST, PersonName, ScimUserId, UserAttributes,
};
use crate::{Error, Result};

pub(super) const USER_URN: &str = "urn:ietf:params:scim:schemas:core:2.0:user:";
pub(super) const GROUP_URN: &str = "urn:ietf:params:scim:schemas:core:2.0:group:";

/// A user from a POST or PUT body (a JSON object).
pub fn user_from_resource(body: &Value) -> Result<UserAttributes> {
    let object = body
        .as_object()
        .ok_or_else(|| Error::invalid("body", "a User resource is a JSON object"))?;
    let mut user = UserAttributes::named(String::new());
    for (name, _, value) in attributes(object, USER_URN)? {
        set_user_attribute(&mut user, &name, value, false)?;
    }
    user.validate()?;
    user.validate_name()?;
    Ok(user)
}

/// A group from a POST or PUT body (a JSON object).
pub fn group_from_resource(body: &Value) -> Result<GroupAttributes> {
    let object = body
        .as_object()
        .ok_or_else(|| Error::invalid("body", "a Group resource is a JSON object"))?;
    let mut group = GroupAttributes {
        display_name: String::new(),
        external_id: None,
        members: Vec::new(),
    };
    for (name, _, value) in attributes(object, GROUP_URN)? {
        match name.as_str() {
            "displayname" => group.display_name = text("displayName", value)?.unwrap_or_default(),
            "externalid" => group.external_id = text("externalId", value)?,
            "members" => group.members = member_ids(value)?,
            _ => {}
        }
    }
    group.validate()?;
    Ok(group)
}

/// The attributes of an object (a resource, or a PATCH value without a path), each by its
/// name ([`attribute_name`]) and its key as given: its own, and those of an object under the core schema's URN
/// itself (`{"urn:ietf:params:scim:schemas:core:2.0:User": {"active": false}}`, the form of
/// RFC 7643 §3 for an extension's attributes, which some clients use for the core's too).
pub(super) fn attributes<'v>(
    object: &'v Map<String, Value>,
    urn: &str,
) -> Result<Vec<(String, &'v str, &'v Value)>> {
    let mut found = Vec::with_capacity(object.len());
    for (key, value) in object {
        if is_schema(key, urn) {
            let inner = value.as_object().ok_or_else(|| {
                Error::invalid("value", "the core schema's attributes are an object")
            })?;
            for (key, value) in inner {
                if is_schema(key, urn) {
                    return Err(Error::invalid(
                        "value",
                        "the core schema's attributes are not nested twice",
                    ));
                }
                found.push((checked_name(key, urn)?, key.as_str(), value));
            }
        } else {
            found.push((checked_name(key, urn)?, key.as_str(), value));
        }
    }
    Ok(found)
}

/// Whether `key` names the core schema itself (`urn:...:User`, with or without the colon
/// that would start an attribute's name).
pub(super) fn is_schema(key: &str, urn: &str) -> bool {
    key.eq_ignore_ascii_case(urn) || key.eq_ignore_ascii_case(urn.trim_end_matches(':'))
}

/// What every core schema's attribute name starts with (`urn:...:core:2.0:User:active`).
const CORE_PREFIX: &str = "urn:ietf:params:scim:schemas:core:2.0:";

/// The attribute's name ([`attribute_name`]), refusing one that names nothing: empty, or
/// under a core schema's URN that is not this resource's (a misspelt `...:2.0:Users:active`
/// must not be dropped like an attribute posture does not keep).
pub(super) fn checked_name(key: &str, urn: &str) -> Result<String> {
    let name = attribute_name(key, urn);
    if name.is_empty() || name.starts_with(CORE_PREFIX) {
        return Err(Error::invalid(
            "path",
            format!("{key:?} names no attribute of the resource's core schema"),
        ));
    }
    Ok(name)
}

/// The single-valued attributes posture keeps, which have no sub-attributes: a path below
/// one (`active.value`) is refused, never dropped (a deprovisioning must not answer 200 and
/// change nothing).
pub(super) const SIMPLE_USER_ATTRIBUTES: [&str; 4] =
    ["username", "externalid", "displayname", "active"];

/// An attribute's name, lowercased, without the core schema's URN.
pub(super) fn attribute_name(key: &str, urn: &str) -> String {
    let lowered = key.to_ascii_lowercase();
    match lowered.strip_prefix(urn) {
        Some(name) => name.to_owned(),
        None => lowered,
    }
}

/// Sets one attribute (`name` lowercased, maybe dotted: `name.givenname`). `merge` adds a
/// complex value's sub-attributes to the ones set (PATCH) instead of replacing them (PUT).
pub(super) fn set_user_attribute(
    user: &mut UserAttributes,
    name: &str,
    value: &Value,
    merge: bool,
) -> Result<()> {
    match name {
        "username" => {
            user.user_name = text("userName", value)?
                .ok_or_else(|| Error::invalid("userName", "is required"))?;
        }
        "externalid" => user.external_id = text("externalId", value)?,
        "displayname" => user.display_name = text("displayName", value)?,
        "active" => user.active = boolean("active", value)?,
        "name" => {
            let mut name = match user.extras.name.take() {
                Some(name) if merge && !value.is_null() => name,
                _ => PersonName::default(),
            };
            if !value.is_null() {
                let object = object("name", value)?;
                for (key, sub) in object {
                    set_name_part(&mut name, &key.to_ascii_lowercase(), sub)?;
                }
            }
            user.extras.name = (!name.is_empty()).then_some(name);
        }
        "emails" => user.extras.emails = emails(value)?,
        _ => {
            if let Some((head, _)) = name.split_once('.')
                && SIMPLE_USER_ATTRIBUTES.contains(&head)
            {
                return Err(Error::invalid(
                    "path",
                    format!("{head} is a single value without sub-attributes"),
                ));
            }
            if let Some(part) = name.strip_prefix("name.") {
                let mut person = user.extras.name.take().unwrap_or_default();
                set_name_part(&mut person, part, value)?;
                user.extras.name = (!person.is_empty()).then_some(person);
            }
            // Anything else (`id`, `meta`, `schemas`, attributes not kept) is dropped.
        }
    }
    Ok(())
}

fn set_name_part(name: &mut PersonName, part: &str, value: &Value) -> Result<()> {
    match part {
        "formatted" => name.formatted = text("name.formatted", value)?,
        "familyname" => name.family_name = text("name.familyName", value)?,
        "givenname" => name.given_name = text("name.givenName", value)?,
        _ => {}
    }
    Ok(())
}

fn object<'v>(field: &'static str, value: &'v Value) -> Result<&'v Map<String, Value>> {
    value
        .as_object()
        .ok_or_else(|| Error::invalid(field, "must be an object"))
}

/// A string attribute; `null` (or an empty string) unassigns it.
pub(super) fn text(field: &'static str, value: &Value) -> Result<Option<String>> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) if s.is_empty() => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err(Error::invalid(field, "must be a string")),
    }
}

/// A boolean attribute: `true`/`false`, or the strings `"true"`/`"false"` in any case.
pub(super) fn boolean(field: &'static str, value: &Value) -> Result<Option<bool>> {
    match value {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(*b)),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        _ => Err(Error::invalid(field, "must be true or false")),
    }
}

/// A list of e-mail addresses (a single object counts as a list of one).
pub(super) fn emails(value: &Value) -> Result<Vec<Email>> {
    let items: &[Value] = match value {
        Value::Null => &[],
        Value::Array(items) => items,
        single => std::slice::from_ref(single),
    };
    items.iter().map(email).collect()
}

pub(super) fn email(value: &Value) -> Result<Email> {
    let object = object("emails", value)?;
    let mut email = Email {
        value: String::new(),
        kind: None,
        primary: None,
    };
    for (key, sub) in object {
        match key.to_ascii_lowercase().as_str() {
            "value" => email.value = text("emails.value", sub)?.unwrap_or_default(),
            "type" => email.kind = text("emails.type", sub)?,
            "primary" => email.primary = boolean("emails.primary", sub)?,
            _ => {}
        }
    }
    Ok(email)
}

/// The user ids of a `members` value: a list of `{"value": "<id>"}` (or one of them).
pub(super) fn member_ids(value: &Value) -> Result<Vec<ScimUserId>> {
    let items: &[Value] = match value {
        Value::Null => &[],
        Value::Array(items) => items,
        single => std::slice::from_ref(single),
    };
    if items.len() > MAX_MEMBERS_PER_REQUEST {
        return Err(Error::invalid(
            "members",
            format!("at most {MAX_MEMBERS_PER_REQUEST} members per request"),
        ));
    }
    items
        .iter()
        .map(|item| {
            let id = match item {
                Value::Object(member) => member
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("value"))
                    .and_then(|(_, v)| v.as_str()),
                Value::String(id) => Some(id.as_str()),
                _ => None,
            }
            .ok_or_else(|| Error::invalid("members", "a member is {\"value\": \"<user id>\"}"))?;
            id.parse::<ScimUserId>()
                .map_err(|_| Error::invalid("members", "a member's value is a user's id"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_user_resource_is_read_with_any_case_and_urn() {
        let user = user_from_resource(&json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
            "urn:ietf:params:scim:schemas:core:2.0:User:userName": "ada@example.com",
            "NAME": {"givenName": "Ada", "familyname": "Lovelace"},
            "emails": [{"value": "ada@example.com", "type": "work", "primary": "True"}],
            "active": "False",
            "title": "Countess",
            "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {"department": "R&D"},
        }))
        .unwrap();
        assert_eq!(user.user_name, "ada@example.com");
        assert_eq!(user.active, Some(false));
        let name = user.extras.name.unwrap();
        assert_eq!(name.given_name.as_deref(), Some("Ada"));
        assert_eq!(name.family_name.as_deref(), Some("Lovelace"));
        assert_eq!(user.extras.emails[0].kind.as_deref(), Some("work"));
        assert_eq!(user.extras.emails[0].primary, Some(true));
    }

    #[test]
    fn a_user_without_a_name_or_of_wrong_types_is_refused() {
        for body in [
            json!({}),
            json!({"userName": null}),
            json!({"userName": 7}),
            json!({"userName": "a", "active": "maybe"}),
            json!({"userName": "a", "emails": ["a@example.com"]}),
            json!({"userName": "a", "name": "Ada"}),
            json!([]),
        ] {
            assert!(user_from_resource(&body).is_err(), "{body}");
        }
    }

    #[test]
    fn a_group_names_its_members_by_id() {
        let id = ScimUserId::generate();
        let group = group_from_resource(&json!({
            "displayName": "Admins",
            "members": [{"value": id.to_string(), "display": "Ada"}],
        }))
        .unwrap();
        assert_eq!(group.members, vec![id]);
        for body in [
            json!({"members": []}),
            json!({"displayName": "A", "members": [{"value": "nope"}]}),
            json!({"displayName": "A", "members": [{"display": "x"}]}),
        ] {
            assert!(group_from_resource(&body).is_err(), "{body}");
        }
        let many: Vec<_> = (0..=MAX_MEMBERS_PER_REQUEST)
            .map(|_| json!({"value": id.to_string()}))
            .collect();
        assert!(group_from_resource(&json!({"displayName": "A", "members": many})).is_err());
    }
}
