//! What an identity provider reads to learn the service (RFC 7644 §4):
//! `ServiceProviderConfig`, `ResourceTypes` and `Schemas`, each describing exactly what
//! posture does — PATCH, filters (`eq` joined by `and`, up to `MAX_PAGE` results per page),
//! ETags; no bulk, sorting or password change — and the attributes it keeps.

use posture_domain::scim::MAX_PAGE;
use serde_json::{Value, json};

use super::render::{GROUP_SCHEMA, USER_SCHEMA, list};

const CONFIG_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig";
const RESOURCE_TYPE_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:ResourceType";
const SCHEMA_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:Schema";

pub(crate) fn service_provider_config(base: &str) -> Value {
    json!({
        "schemas": [CONFIG_SCHEMA],
        "patch": {"supported": true},
        "bulk": {"supported": false, "maxOperations": 0, "maxPayloadSize": 0},
        "filter": {"supported": true, "maxResults": MAX_PAGE},
        "changePassword": {"supported": false},
        "sort": {"supported": false},
        "etag": {"supported": true},
        "authenticationSchemes": [{
            "type": "oauthbearertoken",
            "name": "Bearer token",
            "description": "A posture API key holding the provision:scim scope, issued in posture's console.",
            "primary": true,
        }],
        "meta": {
            "resourceType": "ServiceProviderConfig",
            "location": format!("{base}/ServiceProviderConfig"),
        },
    })
}

/// The resource type `id` (`User` or `Group`).
pub(crate) fn resource_type(id: &str, base: &str) -> Option<Value> {
    let (schema, description) = match id {
        "User" => (USER_SCHEMA, "A person who may sign in to posture's console"),
        "Group" => (
            GROUP_SCHEMA,
            "A group of users; one may name the console's admins",
        ),
        _ => return None,
    };
    Some(json!({
        "schemas": [RESOURCE_TYPE_SCHEMA],
        "id": id,
        "name": id,
        "endpoint": format!("/{id}s"),
        "description": description,
        "schema": schema,
        "schemaExtensions": [],
        "meta": {
            "resourceType": "ResourceType",
            "location": format!("{base}/ResourceTypes/{id}"),
        },
    }))
}

pub(crate) fn resource_types(base: &str) -> Value {
    let all: Vec<Value> = ["User", "Group"]
        .into_iter()
        .filter_map(|id| resource_type(id, base))
        .collect();
    let total = all.len() as u64;
    list(all, total, 1)
}

fn attribute(name: &str, kind: &str, description: &str) -> Value {
    json!({
        "name": name,
        "type": kind,
        "multiValued": false,
        "description": description,
        "required": false,
        "caseExact": false,
        "mutability": "readWrite",
        "returned": "default",
        "uniqueness": "none",
    })
}

fn user_schema() -> Value {
    let mut user_name = attribute(
        "userName",
        "string",
        "Unique per customer, case-insensitively; matched to the sign-in's claim.",
    );
    user_name["required"] = true.into();
    user_name["uniqueness"] = "server".into();
    let mut name = attribute("name", "complex", "The user's name.");
    name["subAttributes"] = json!([
        attribute("formatted", "string", "The full name."),
        attribute("familyName", "string", "The family name."),
        attribute("givenName", "string", "The given name."),
    ]);
    let mut emails = attribute("emails", "complex", "E-mail addresses (at most 10).");
    emails["multiValued"] = true.into();
    let mut kind = attribute("type", "string", "work, home or other.");
    kind["canonicalValues"] = json!(["work", "home", "other"]);
    emails["subAttributes"] = json!([
        attribute("value", "string", "The address."),
        kind,
        attribute("primary", "boolean", "The primary address (one at most)."),
    ]);
    json!({
        "schemas": [SCHEMA_SCHEMA],
        "id": USER_SCHEMA,
        "name": "User",
        "description": "A person who may sign in to posture's console",
        "attributes": [
            user_name,
            name,
            attribute("displayName", "string", "The name shown."),
            emails,
            attribute("active", "boolean", "Whether the user may sign in."),
        ],
    })
}

fn group_schema() -> Value {
    let mut display_name = attribute(
        "displayName",
        "string",
        "Unique per customer, case-insensitively.",
    );
    display_name["required"] = true.into();
    display_name["uniqueness"] = "server".into();
    let mut members = attribute("members", "complex", "The group's users.");
    members["multiValued"] = true.into();
    let mut value = attribute("value", "string", "The user's id.");
    value["mutability"] = "immutable".into();
    let mut reference = attribute("$ref", "reference", "The user's URI.");
    reference["referenceTypes"] = json!(["User"]);
    reference["mutability"] = "immutable".into();
    let mut kind = attribute("type", "string", "Always User.");
    kind["canonicalValues"] = json!(["User"]);
    kind["mutability"] = "immutable".into();
    members["subAttributes"] = json!([value, reference, kind]);
    json!({
        "schemas": [SCHEMA_SCHEMA],
        "id": GROUP_SCHEMA,
        "name": "Group",
        "description": "A group of users",
        "attributes": [display_name, members],
    })
}

/// The schema `id` (its URN).
pub(crate) fn schema(id: &str, base: &str) -> Option<Value> {
    let mut schema = match id {
        USER_SCHEMA => user_schema(),
        GROUP_SCHEMA => group_schema(),
        _ => return None,
    };
    schema["meta"] = json!({
        "resourceType": "Schema",
        "location": format!("{base}/Schemas/{id}"),
    });
    Some(schema)
}

pub(crate) fn schemas(base: &str) -> Value {
    let all: Vec<Value> = [USER_SCHEMA, GROUP_SCHEMA]
        .into_iter()
        .filter_map(|id| schema(id, base))
        .collect();
    let total = all.len() as u64;
    list(all, total, 1)
}
