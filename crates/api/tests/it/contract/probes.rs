//! The probes of an operation, derived from its entry in the document — and so from its
//! `Endpoint` in the route table — rather than written per operation id. A new route is
//! probed without touching this file:
//!
//! * its path with every `{param}` filled from the fixture of the collection before it
//!   (`/webhooks/{id}` → the fixture webhook);
//! * success: the documented request example (its dates moved to the last hours, as
//!   examples age), expecting the documented 2xx; again with each value of every enumerated
//!   query parameter (`format=cef`, `severity=low`);
//! * 400 for each query parameter given a value its schema rejects, the reason starting with
//!   the parameter's name (a `tenant` that is no GUID too: its form says nothing of any
//!   tenant), and for a parameter the route does not declare;
//! * 404 for each path parameter naming nothing, and for a query parameter naming a
//!   resource (`tenant`) that names nothing; success with the fixture it names;
//! * for a route with a body: 422 naming each property given a value of the wrong type,
//!   400 for a body that is not JSON, 415 for one that is not declared as JSON.
//!
//! State-dependent answers (409 while a rotation or a delivery is under way, 412 for a stale
//! `If-Match`) are not derivable from the document: the routes' own tests cover them
//! (`routes/webhook_ops/`).

use chrono::{DateTime, Duration, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};

use super::{resolve, validator};

/// What the probes fill path parameters with.
pub struct Fixtures {
    pub identity: String,
    pub finding: String,
    pub webhook: String,
    pub delivery: String,
    pub event: String,
    pub tenant: String,
}

impl Fixtures {
    /// The fixture for a `{param}` following the collection `collection`.
    fn of(&self, collection: &str) -> &str {
        match collection {
            "identities" => &self.identity,
            "findings" => &self.finding,
            "webhooks" => &self.webhook,
            "deliveries" => &self.delivery,
            "events" => &self.event,
            other => panic!("no fixture for a path parameter under /{other}: add one"),
        }
    }

    /// The fixture for a query parameter that names a resource, if it does.
    fn query(&self, name: &str) -> Option<&str> {
        (name == "tenant").then_some(self.tenant.as_str())
    }
}

/// A body to send.
pub enum Sent {
    None,
    Json(Value),
    Raw {
        content_type: &'static str,
        bytes: &'static [u8],
    },
}

/// A request to make, the status it must get and, for an error, how its reason starts.
pub struct Probe {
    pub method: Method,
    pub path: String,
    pub body: Sent,
    pub status: StatusCode,
    pub reason_starts: Option<String>,
}

/// A value of no parameter's or property's schema: a UUID of the right form that names
/// nothing, or an external id that names nothing.
fn unknown(schema: &Value) -> &'static str {
    if schema["format"] == "uuid" {
        "00000000-0000-4000-8000-000000000000"
    } else {
        "nothing-by-this-id"
    }
}

/// The path with each `{param}` replaced: by its fixture, or, for `unknown`, by a value
/// naming nothing.
fn fill(template: &str, fixtures: &Fixtures, unknown: Option<(&str, &str)>) -> String {
    let segments: Vec<&str> = template.split('/').collect();
    let mut filled = Vec::with_capacity(segments.len());
    for (i, segment) in segments.iter().enumerate() {
        match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => match unknown {
                Some((param, value)) if param == name => filled.push(value.to_owned()),
                _ => filled.push(fixtures.of(segments[i - 1]).to_owned()),
            },
            None => filled.push((*segment).to_owned()),
        }
    }
    filled.join("/")
}

/// The success status the operation documents (the lowest 2xx).
fn success_status(operation: &Value) -> StatusCode {
    let code = operation["responses"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|code| code.starts_with('2'))
        .min()
        .expect("an operation documents a success");
    StatusCode::from_bytes(code.as_bytes()).unwrap()
}

fn documents(operation: &Value, status: StatusCode) -> bool {
    operation["responses"][status.as_str()].is_object()
}

/// The request body's schema and example, if the operation takes one.
fn request_body(operation: &Value) -> Option<(&Value, Value)> {
    let media = &resolve(&operation["requestBody"])["content"]["application/json"];
    let schema = media.get("schema")?;
    let example = media
        .get("example")
        .cloned()
        .unwrap_or_else(|| panic!("a request body without an example: {operation}"));
    Some((schema, example))
}

/// The example's date-times moved together so that the latest is an hour ago: an example
/// keeps its order and spacing but not its age, which would take it past a retention.
fn present(example: Value) -> Value {
    let mut dates = Vec::new();
    collect_dates(&example, &mut dates);
    let Some(latest) = dates.iter().max() else {
        return example;
    };
    let shift = Utc::now() - Duration::hours(1) - *latest;
    shift_dates(example, shift)
}

fn collect_dates(value: &Value, into: &mut Vec<DateTime<Utc>>) {
    match value {
        Value::String(text) => into.extend(DateTime::parse_from_rfc3339(text).map(|d| d.to_utc())),
        Value::Array(items) => items.iter().for_each(|v| collect_dates(v, into)),
        Value::Object(fields) => fields.values().for_each(|v| collect_dates(v, into)),
        _ => {}
    }
}

fn shift_dates(value: Value, shift: Duration) -> Value {
    match value {
        Value::String(text) => match DateTime::parse_from_rfc3339(&text) {
            Ok(date) => json!((date.to_utc() + shift).to_rfc3339()),
            Err(_) => Value::String(text),
        },
        Value::Array(items) => items.into_iter().map(|v| shift_dates(v, shift)).collect(),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (k, shift_dates(v, shift)))
                .collect::<Map<_, _>>(),
        ),
        other => other,
    }
}

/// The values of an enumerated parameter (directly, through a `$ref` or as a list's items).
fn enumerated(schema: &Value) -> Vec<String> {
    let schema = resolve(schema);
    let values = if schema["type"] == "array" {
        &resolve(&schema["items"])["enum"]
    } else {
        &schema["enum"]
    };
    values
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// A query value the parameter's schema rejects, if one of a few candidates is.
fn rejected_value(schema: &Value) -> Option<&'static str> {
    let schema = resolve(schema);
    let check = validator(schema);
    let is_list = schema["type"] == "array";
    ["x", "not-a-value", "!", "-1"]
        .into_iter()
        .find(|candidate| {
            // A query string is text; an integer parameter reads it as a number when it is one.
            let value = candidate
                .parse::<i64>()
                .map_or_else(|_| json!(candidate), |n| json!(n));
            let instance = if is_list { json!([value]) } else { value };
            !check.is_valid(&instance)
        })
}

/// A value of the wrong JSON type for a property.
fn wrong_type(schema: &Value) -> Value {
    let schema = resolve(schema);
    let is_string = |s: &Value| {
        let s = resolve(s);
        s["type"] == "string"
            || s["type"]
                .as_array()
                .is_some_and(|t| t.contains(&json!("string")))
    };
    let string_like = is_string(schema)
        || ["anyOf", "oneOf"].iter().any(|u| {
            schema[u]
                .as_array()
                .is_some_and(|b| b.iter().any(is_string))
        });
    if string_like {
        json!(12345)
    } else {
        json!("not of this type")
    }
}

/// Every probe of the operation `method template`, error probes first (a success may delete
/// the fixture they use).
pub fn probes(method: &str, template: &str, operation: &Value, fixtures: &Fixtures) -> Vec<Probe> {
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    let path = fill(template, fixtures, None);
    let probe = |path: String, body: Sent, status: StatusCode, reason: Option<&str>| Probe {
        method: method.clone(),
        path,
        body,
        status,
        reason_starts: reason.map(str::to_owned),
    };
    let parameters: Vec<&Value> = operation["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(resolve)
        .collect();
    let mut errors = Vec::new();
    let mut successes = Vec::new();
    let body = request_body(operation);
    let sent = || match &body {
        Some((_, example)) => Sent::Json(present(example.clone())),
        None => Sent::None,
    };

    for parameter in &parameters {
        let name = parameter["name"].as_str().unwrap();
        match parameter["in"].as_str() {
            Some("path") if documents(operation, StatusCode::NOT_FOUND) => {
                let missing = fill(
                    template,
                    fixtures,
                    Some((name, unknown(&parameter["schema"]))),
                );
                errors.push(probe(missing, sent(), StatusCode::NOT_FOUND, None));
            }
            Some("query") => {
                // A bad value is a 400 naming the parameter, a resource's too: a value
                // that cannot name any says nothing of one that exists.
                if let Some(bad) = rejected_value(&parameter["schema"]) {
                    let bad = format!("{path}?{name}={bad}");
                    errors.push(probe(bad, sent(), StatusCode::BAD_REQUEST, Some(name)));
                }
                if let Some(fixture) = fixtures.query(name) {
                    let with = format!("{path}?{name}={fixture}");
                    successes.push(probe(with, sent(), success_status(operation), None));
                    if documents(operation, StatusCode::NOT_FOUND) {
                        let missing = format!("{path}?{name}={}", unknown(&parameter["schema"]));
                        errors.push(probe(missing, sent(), StatusCode::NOT_FOUND, None));
                    }
                }
                for value in enumerated(&parameter["schema"]) {
                    let with = format!("{path}?{name}={value}");
                    successes.push(probe(with, sent(), success_status(operation), None));
                }
            }
            _ => {}
        }
    }
    if documents(operation, StatusCode::BAD_REQUEST) {
        let undeclared = format!("{path}?notAParameter=1");
        let reason = Some("unknown query parameter \"notAParameter\"");
        errors.push(probe(undeclared, sent(), StatusCode::BAD_REQUEST, reason));
    }
    if let Some((schema, example)) = &body {
        let properties = resolve(schema)["properties"].as_object().unwrap();
        for (name, property) in properties {
            let mut wrong = present(example.clone());
            wrong[name] = wrong_type(property);
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            errors.push(probe(path.clone(), Sent::Json(wrong), status, Some(name)));
        }
        let not_json = Sent::Raw {
            content_type: "application/json",
            bytes: b"{\"name\": ",
        };
        errors.push(probe(path.clone(), not_json, StatusCode::BAD_REQUEST, None));
        let text = Sent::Raw {
            content_type: "text/plain",
            bytes: b"name=x",
        };
        let status = StatusCode::UNSUPPORTED_MEDIA_TYPE;
        errors.push(probe(path.clone(), text, status, None));
    }
    successes.insert(0, probe(path, sent(), success_status(operation), None));
    errors.extend(successes);
    errors
}

#[test]
fn paths_are_filled_from_the_collection_before_each_parameter() {
    let fixtures = Fixtures {
        identity: "u1".into(),
        finding: "f1".into(),
        webhook: "w".into(),
        delivery: "d".into(),
        event: "e".into(),
        tenant: "t".into(),
    };
    let template = "/api/v1/webhooks/{id}/deliveries/{deliveryId}";
    assert_eq!(
        fill(template, &fixtures, None),
        "/api/v1/webhooks/w/deliveries/d"
    );
    assert_eq!(
        fill(template, &fixtures, Some(("deliveryId", "x"))),
        "/api/v1/webhooks/w/deliveries/x"
    );
}

#[test]
fn example_dates_keep_their_spacing_and_end_an_hour_ago() {
    let moved = present(json!({"since": "2020-01-01T00:00:00Z", "until": "2020-01-01T02:00:00Z"}));
    let since = DateTime::parse_from_rfc3339(moved["since"].as_str().unwrap()).unwrap();
    let until = DateTime::parse_from_rfc3339(moved["until"].as_str().unwrap()).unwrap();
    assert_eq!(until - since, Duration::hours(2));
    let age = Utc::now() - until.to_utc();
    assert!(
        age > Duration::minutes(59) && age < Duration::minutes(61),
        "{age}"
    );
}
