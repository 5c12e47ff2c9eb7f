//! No example of the contract contradicts posture's rules — recorded or derived, on a
//! component, a body or a webhook. The schemas check forms and lengths (secrets, key
//! prefixes, formats: `examples.rs`); these are the rules between fields a schema cannot
//! state.

use posture_domain::{api_key::DISPLAY_PREFIX_PATTERN, secrets::SECRET_PATTERN};
use regex::Regex;
use serde_json::Value;

use crate::openapi::render;

/// Every example of the document, with where it is.
fn examples(document: &Value) -> Vec<(String, Value)> {
    let mut found = Vec::new();
    for (name, schema) in document["components"]["schemas"]
        .as_object()
        .into_iter()
        .flatten()
    {
        for example in schema["examples"].as_array().into_iter().flatten() {
            found.push((format!("components.schemas.{name}"), example.clone()));
        }
    }
    for section in ["paths", "webhooks"] {
        for (path, item) in document[section].as_object().into_iter().flatten() {
            for (method, operation) in item.as_object().into_iter().flatten() {
                let mut media = vec![(
                    "request".to_owned(),
                    operation.pointer("/requestBody/content/application~1json/example"),
                )];
                for (status, response) in operation["responses"].as_object().into_iter().flatten() {
                    media.push((
                        status.clone(),
                        response.pointer("/content/application~1json/example"),
                    ));
                }
                for (what, example) in media {
                    if let Some(example) = example {
                        found.push((format!("{section} {method} {path} {what}"), example.clone()));
                    }
                }
            }
        }
    }
    found
}

fn time(value: &Value) -> Option<chrono::DateTime<chrono::Utc>> {
    value.as_str()?.parse().ok()
}

/// The rules an object breaks.
fn broken(object: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut broken = Vec::new();
    let field = |name: &str| object.get(name).unwrap_or(&Value::Null);
    // A subscription: disabled exactly when posture says why; active exactly when active.
    if object.contains_key("disabledReason") && object.contains_key("status") {
        let reason = !field("disabledReason").is_null();
        if (field("status") == "disabled") != reason {
            broken.push("disabledReason is set exactly when status is disabled".to_owned());
        }
        if object.contains_key("active")
            && (field("active") == true) != (field("status") == "active")
        {
            broken.push("active is true exactly when status is active".to_owned());
        }
    }
    // A delivery: only a pending one has a next attempt.
    let next = !field("nextAttemptAt").is_null();
    if object.contains_key("trigger")
        && object.contains_key("nextAttemptAt")
        && (field("status") == "pending") != next
    {
        broken.push("nextAttemptAt is set exactly when status is pending".to_owned());
    }
    for (earlier, later) in [
        ("modifiedAt", "updatedAt"),
        ("modifiedAt", "lastSeenAt"),
        ("firstSeenAt", "lastSeenAt"),
        ("createdAt", "lastAttemptAt"),
        ("createdAt", "expiresAt"),
        ("from", "to"),
    ] {
        // A finding's triage moves its `modifiedAt` between passes, past `updatedAt`.
        let triaged = earlier == "modifiedAt" && object.contains_key("triage");
        if let (Some(a), Some(b)) = (time(field(earlier)), time(field(later)))
            && a > b
            && !triaged
        {
            broken.push(format!("{earlier} is not after {later}"));
        }
    }
    // A finding carried with its change shows the changed field's new value.
    if let Some(change) = field("change").as_object()
        && let Some(changed) = change.get("field").and_then(Value::as_str)
        && change.get("to") != object.get(changed)
    {
        broken.push(format!("{changed} is the change's `to`"));
    }
    let patterns = [
        ("signingSecret", SECRET_PATTERN),
        ("prefix", DISPLAY_PREFIX_PATTERN),
    ];
    for (name, pattern) in patterns {
        if let Some(text) = field(name).as_str()
            && !Regex::new(pattern).expect("a pattern").is_match(text)
        {
            broken.push(format!("{name} {text:?} is not of the form {pattern}"));
        }
    }
    broken
}

fn check(value: &Value, path: &str, problems: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            problems.extend(broken(object).into_iter().map(|b| format!("{path}: {b}")));
            for (key, item) in object {
                check(item, &format!("{path}.{key}"), problems);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check(item, &format!("{path}[{i}]"), problems);
            }
        }
        _ => {}
    }
}

#[test]
fn no_example_contradicts_the_rules_between_fields() {
    let document: Value = serde_json::from_str(&render()).expect("the contract is JSON");
    let examples = examples(&document);
    assert!(examples.len() > 200, "{}", examples.len());
    let mut problems = Vec::new();
    for (place, example) in &examples {
        check(example, place, &mut problems);
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_rules_catch_what_the_review_found() {
    // The 201 example of issue 33: active with a disabled reason, a short secret.
    let bad = serde_json::json!({"status": "active", "active": true, "disabledReason": "failing",
        "signingSecret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "prefix": "svc_k3j9x2ab"});
    let mut problems = Vec::new();
    check(&bad, "example", &mut problems);
    assert_eq!(problems.len(), 3, "{problems:#?}");
}
