//! The resources as SCIM shows them (RFC 7643 §3): `schemas`, `id`, the attributes kept,
//! and `meta` (`resourceType`, `created`, `lastModified`, `location`, `version`, the same
//! weak tag as the `ETag` header). A group's members are shown by `value`, `$ref` and
//! `type`: `display` is not kept (a user's name is the user's), so it is not shown either.
//! [`project`] applies a request's `attributes` and `excludedAttributes`.

use chrono::SecondsFormat;
use posture_domain::scim::{Meta, ScimGroup, ScimUser};
use serde_json::{Value, json};

pub(crate) const USER_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
pub(crate) const GROUP_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:Group";
pub(crate) const LIST_URN: &str = "urn:ietf:params:scim:api:messages:2.0:ListResponse";

/// A resource's version as a weak entity tag: `W/"3"`.
pub(crate) fn etag(version: u64) -> String {
    format!("W/\"{version}\"")
}

fn meta(kind: &str, meta: &Meta, location: String) -> Value {
    json!({
        "resourceType": kind,
        "created": meta.created.to_rfc3339_opts(SecondsFormat::Millis, true),
        "lastModified": meta.modified.to_rfc3339_opts(SecondsFormat::Millis, true),
        "location": location,
        "version": etag(meta.version),
    })
}

/// `base` is the service's URL up to `/scim/v2`.
pub(crate) fn user(user: &ScimUser, base: &str) -> Value {
    let a = &user.attributes;
    let mut body = json!({
        "schemas": [USER_SCHEMA],
        "id": user.id.to_string(),
        "userName": a.user_name,
    });
    if let Some(active) = a.active {
        body["active"] = active.into();
    }
    if let Some(external_id) = &a.external_id {
        body["externalId"] = external_id.as_str().into();
    }
    if let Some(display_name) = &a.display_name {
        body["displayName"] = display_name.as_str().into();
    }
    if let Some(name) = &a.extras.name {
        body["name"] = json!(name);
    }
    if !a.extras.emails.is_empty() {
        body["emails"] = json!(a.extras.emails);
    }
    body["meta"] = meta("User", &user.meta, format!("{base}/Users/{}", user.id));
    body
}

pub(crate) fn group(group: &ScimGroup, base: &str) -> Value {
    let mut body = json!({
        "schemas": [GROUP_SCHEMA],
        "id": group.id.to_string(),
        "displayName": group.display_name,
    });
    if let Some(external_id) = &group.external_id {
        body["externalId"] = external_id.as_str().into();
    }
    if let Some(members) = &group.members {
        body["members"] = members
            .iter()
            .map(|m| {
                json!({
                    "value": m.user.to_string(),
                    "$ref": format!("{base}/Users/{}", m.user),
                    "type": "User",
                })
            })
            .collect();
    }
    body["meta"] = meta("Group", &group.meta, format!("{base}/Groups/{}", group.id));
    body
}

/// A list response (RFC 7644 §3.4.2): `startIndex` as asked, `itemsPerPage` as shown.
pub(crate) fn list(resources: Vec<Value>, total: u64, start_index: u32) -> Value {
    json!({
        "schemas": [LIST_URN],
        "totalResults": total,
        "startIndex": start_index,
        "itemsPerPage": resources.len(),
        "Resources": resources,
    })
}

/// Applies `attributes` (only these, besides `schemas` and `id`, which are always
/// returned) and `excludedAttributes` (all but these) to a resource. Names are
/// case-insensitive, may carry the core schema's URN, and may name a sub-attribute
/// (`name.givenName`).
pub(crate) fn project(resource: &mut Value, attributes: &[String], excluded: &[String]) {
    let Some(object) = resource.as_object_mut() else {
        return;
    };
    let always = |key: &str| key == "schemas" || key == "id";
    if !attributes.is_empty() {
        object.retain(|key, value| {
            let key = key.to_ascii_lowercase();
            if always(&key) || attributes.contains(&key) {
                return true;
            }
            let prefix = format!("{key}.");
            let subs: Vec<&str> = attributes
                .iter()
                .filter_map(|a| a.strip_prefix(&prefix))
                .collect();
            if subs.is_empty() {
                return false;
            }
            keep_subs(value, &subs);
            true
        });
    }
    for name in excluded {
        match name.split_once('.') {
            None if !always(name) => {
                object.retain(|key, _| !key.eq_ignore_ascii_case(name));
            }
            None => {}
            Some((top, sub)) => {
                for (key, value) in object.iter_mut() {
                    if key.eq_ignore_ascii_case(top) {
                        drop_sub(value, sub);
                    }
                }
            }
        }
    }
}

fn keep_subs(value: &mut Value, subs: &[&str]) {
    match value {
        Value::Object(object) => {
            object.retain(|key, _| subs.iter().any(|s| key.eq_ignore_ascii_case(s)));
        }
        Value::Array(items) => items.iter_mut().for_each(|item| keep_subs(item, subs)),
        _ => {}
    }
}

fn drop_sub(value: &mut Value, sub: &str) {
    match value {
        Value::Object(object) => object.retain(|key, _| !key.eq_ignore_ascii_case(sub)),
        Value::Array(items) => items.iter_mut().for_each(|item| drop_sub(item, sub)),
        _ => {}
    }
}

/// The attribute names of an `attributes` or `excludedAttributes` list, lowercased and
/// without the core schemas' URNs.
pub(crate) fn attribute_list<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    names
        .into_iter()
        .flat_map(|n| n.split(','))
        .map(|n| {
            let lowered = n.trim().to_ascii_lowercase();
            [USER_SCHEMA, GROUP_SCHEMA]
                .iter()
                .find_map(|urn| {
                    lowered
                        .strip_prefix(&format!("{}:", urn.to_ascii_lowercase()))
                        .map(str::to_owned)
                })
                .unwrap_or(lowered)
        })
        .filter(|n| !n.is_empty())
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_keep_what_they_name_and_excluded_drops_it() {
        let resource = json!({
            "schemas": [USER_SCHEMA], "id": "1", "userName": "ada", "externalId": "e",
            "name": {"givenName": "Ada", "familyName": "L"},
            "emails": [{"value": "a@x", "type": "work"}],
        });
        let mut only = resource.clone();
        project(
            &mut only,
            &attribute_list(["externalId,name.givenName"]),
            &[],
        );
        assert_eq!(
            only,
            json!({"schemas": [USER_SCHEMA], "id": "1", "externalId": "e", "name": {"givenName": "Ada"}})
        );
        let mut without = resource.clone();
        let urn = format!("{USER_SCHEMA}:name");
        project(
            &mut without,
            &[],
            &attribute_list([urn.as_str(), "emails.type", "id"]),
        );
        assert_eq!(
            without,
            json!({
                "schemas": [USER_SCHEMA], "id": "1", "userName": "ada", "externalId": "e",
                "emails": [{"value": "a@x"}],
            })
        );
    }
}
