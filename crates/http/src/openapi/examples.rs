//! Examples for every schema and every operation of the contract. An operation's success
//! body, a webhook's delivery and every component met inside them are what the service
//! answered (`recorded.rs`). The rest are derived from the schemas themselves so they cannot
//! drift from them: a component's example is built from its
//! properties (a referenced component's own example, an enumeration's first value, a
//! format's canonical value, an integer's minimum), or is the one its wire type declares
//! (`#[schemars(example = ...)]` on the type or the field: the OCSF event's are what the
//! mapping makes of a sample finding). A string field with neither has no example, and a
//! test fails naming it, so a new field gets a realistic value rather than `"string"`.
//! Another test validates every example against its schema.

use indexmap::IndexMap;
use posture_domain::{Refusal, Scope};
use serde_json::{Map, Value, json};

use crate::error::ApiError;

/// The canonical value of a string format.
fn formatted(format: &str) -> Option<Value> {
    Some(match format {
        "date-time" => json!("2026-11-20T08:30:00Z"),
        "date" => json!("2026-11-20"),
        "uuid" => json!("3b5e8f1c-2a4d-4e6f-9a1b-7c8d9e0f1a2b"),
        "uri" => json!("https://hooks.example.com/posture"),
        _ => return None,
    })
}

/// Builds examples; records the fields it found no value for.
struct Builder<'a> {
    components: &'a IndexMap<String, Value>,
    done: IndexMap<String, Value>,
    missing: Vec<String>,
}

impl Builder<'_> {
    fn component(&mut self, name: &str, depth: usize) -> Value {
        if let Some(done) = self.done.get(name) {
            return done.clone();
        }
        let Some(schema) = self.components.get(name) else {
            self.missing.push(format!("{name}: no such component"));
            return Value::Null;
        };
        let example = self.example(schema, name, "", depth + 1);
        self.done.insert(name.to_owned(), example.clone());
        example
    }

    fn example(&mut self, schema: &Value, component: &str, field: &str, depth: usize) -> Value {
        if depth > 12 {
            return Value::Null;
        }
        if let Some(first) = schema["examples"].as_array().and_then(|e| e.first()) {
            return first.clone();
        }
        if let Some(target) = schema["$ref"].as_str() {
            let name = target.rsplit('/').next().unwrap_or_default();
            return self.component(name, depth);
        }
        if let Some(constant) = schema.get("const") {
            return constant.clone();
        }
        if let Some(first) = schema["enum"]
            .as_array()
            .and_then(|values| values.iter().find(|v| !v.is_null()))
        {
            return first.clone();
        }
        for union in ["anyOf", "oneOf"] {
            if let Some(branch) = schema[union]
                .as_array()
                .and_then(|b| b.iter().find(|b| b["type"] != "null"))
            {
                return self.example(branch, component, field, depth + 1);
            }
        }
        let kind = match &schema["type"] {
            Value::String(kind) => kind.as_str(),
            Value::Array(kinds) => kinds
                .iter()
                .filter_map(Value::as_str)
                .find(|k| *k != "null")
                .unwrap_or("null"),
            _ => "object",
        };
        match kind {
            "object" => self.object(schema, component, depth),
            "array" => {
                let item = self.example(&schema["items"], component, field, depth + 1);
                json!([item])
            }
            "string" => schema["format"]
                .as_str()
                .and_then(formatted)
                .unwrap_or_else(|| {
                    self.missing.push(format!("{component}.{field}"));
                    Value::Null
                }),
            "integer" | "number" => schema.get("minimum").cloned().unwrap_or(json!(1)),
            "boolean" => json!(true),
            _ => Value::Null,
        }
    }

    fn object(&mut self, schema: &Value, component: &str, depth: usize) -> Value {
        let mut object = Map::new();
        if let Some(properties) = schema["properties"].as_object() {
            for (field, property) in properties {
                let value = self.example(property, component, field, depth + 1);
                object.insert(field.clone(), value);
            }
        }
        if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
            // A map (UPR factors): two realistic keys.
            let value = self.example(values, component, "score", depth + 1);
            let value = value.as_u64().map_or(value, |v| json!(v.min(40)));
            object.insert("privilegedRoles".to_owned(), value.clone());
            object.insert("staleCredentials".to_owned(), value);
        }
        Value::Object(object)
    }
}

/// Sets `examples` on every component schema that has none, starting from those `recorded`
/// (values the service answered); returns the examples by component and the fields no
/// example value was found for.
pub fn annotate(
    components: &mut IndexMap<String, Value>,
    recorded: IndexMap<String, Value>,
) -> (IndexMap<String, Value>, Vec<String>) {
    let snapshot = components.clone();
    let mut builder = Builder {
        components: &snapshot,
        done: recorded,
        missing: Vec::new(),
    };
    for name in snapshot.keys() {
        builder.component(name, 0);
    }
    for (name, schema) in components.iter_mut() {
        if let (Some(object), Some(example)) = (schema.as_object_mut(), builder.done.get(name)) {
            object.entry("examples").or_insert_with(|| json!([example]));
        }
    }
    (builder.done, builder.missing)
}

/// The example of a body with this schema (a `$ref` to a component, mostly).
pub fn of_schema(schema: &Value, examples: &IndexMap<String, Value>) -> Option<Value> {
    if let Some(target) = schema["$ref"].as_str() {
        return examples.get(target.rsplit('/').next()?).cloned();
    }
    schema["examples"].as_array()?.first().cloned()
}

/// The error body an operation answers with this status (its own scope in a 403).
fn error_example(status: &str, scope: Option<&str>) -> Option<Value> {
    let error = match status {
        // Every operation refuses a parameter it does not take.
        "400" => ApiError::invalid(
            Refusal::Unknown,
            "colour",
            "unknown query parameter \"colour\"; allowed: limit, after",
        ),
        "401" => ApiError::Unauthorized,
        "403" => ApiError::InsufficientScope(
            scope
                .and_then(|s| s.parse::<Scope>().ok())
                .unwrap_or(Scope::ReadFindings),
        ),
        "404" => ApiError::NotFound(Some("no such resource for this customer")),
        "409" => ApiError::Conflict("a delivery of this subscription is still pending".to_owned()),
        "412" => ApiError::PreconditionFailed(
            "If-Match: the subscription changed since this ETag was read (now \"v4\")".to_owned(),
        ),
        "413" => ApiError::PayloadTooLarge("the body must be at most 256 KiB".to_owned()),
        "415" => ApiError::UnsupportedMediaType("Content-Type must be application/json".to_owned()),
        "422" => ApiError::unprocessable(
            Refusal::Invalid,
            "webhookUrl",
            "webhookUrl: must be an https:// URL",
        ),
        "429" => ApiError::RateLimited { retry_after: 12 },
        "500" => ApiError::Internal,
        "503" => ApiError::Unavailable,
        _ => return None,
    };
    serde_json::to_value(error.body()).ok()
}

/// Adds examples to every component schema, request body and JSON response of the
/// rendered document; returns the fields no example value was found for.
pub fn add_to_document(document: &mut Value) -> Vec<String> {
    let Some(schemas) = document["components"]["schemas"].as_object_mut() else {
        return vec!["the document has no component schemas".to_owned()];
    };
    let mut components: IndexMap<String, Value> = std::mem::take(schemas).into_iter().collect();
    let recorded = super::recorded::component_examples(document, &components);
    let (examples, missing) = annotate(&mut components, recorded);
    if let Some(schemas) = document["components"]["schemas"].as_object_mut() {
        *schemas = components.into_iter().collect();
    }
    for section in ["paths", "webhooks"] {
        let Some(items) = document[section].as_object_mut() else {
            continue;
        };
        for (name, item) in items.iter_mut() {
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            for operation in item.values_mut() {
                if section == "webhooks"
                    && let Some(media) = operation
                        .pointer_mut("/requestBody/content/application~1json")
                        .and_then(Value::as_object_mut)
                    && let Some(delivery) = super::recorded::delivery(name)
                {
                    media.entry("example").or_insert(delivery);
                }
                annotate_operation(operation, &examples);
            }
        }
    }
    missing
}

/// Examples on an operation's JSON request body and JSON responses.
fn annotate_operation(operation: &mut Value, examples: &IndexMap<String, Value>) {
    let scope = operation["x-required-scope"].as_str().map(str::to_owned);
    let operation_id = operation["operationId"].as_str().map(str::to_owned);
    if let Some(media) = operation
        .pointer_mut("/requestBody/content/application~1json")
        .and_then(Value::as_object_mut)
        && let Some(example) = of_schema(&media["schema"], examples)
    {
        media.entry("example").or_insert(example);
    }
    let Some(responses) = operation["responses"].as_object_mut() else {
        return;
    };
    for (status, response) in responses.iter_mut() {
        let Some(media) = response
            .pointer_mut("/content/application~1json")
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        let recorded = operation_id
            .as_deref()
            .and_then(|id| super::recorded::response(id, status));
        let example = match status.starts_with(['4', '5']) {
            true => error_example(status, scope.as_deref()),
            false => recorded.or_else(|| of_schema(&media["schema"], examples)),
        };
        if let Some(example) = example {
            media.entry("example").or_insert(example);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use crate::openapi::{fields_without_examples, render};

    fn validate(document: &Value, schema: &Value, instance: &Value, what: &str) {
        let mut root = schema.clone();
        root.as_object_mut()
            .unwrap()
            .insert("components".to_owned(), document["components"].clone());
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&root)
            .unwrap();
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{what}: {errors:?}\n{instance}");
    }

    #[test]
    fn every_schema_field_has_a_realistic_example_value() {
        assert_eq!(fields_without_examples(), Vec::<String>::new());
    }

    #[test]
    fn every_schema_has_an_example_and_it_validates_against_the_schema() {
        let document: Value = serde_json::from_str(&render()).unwrap();
        let schemas = document["components"]["schemas"].as_object().unwrap();
        assert!(schemas.len() > 50);
        for (name, schema) in schemas {
            let examples = schema["examples"]
                .as_array()
                .unwrap_or_else(|| panic!("{name}"));
            assert!(!examples.is_empty(), "{name}");
            let reference = serde_json::json!({ "$ref": format!("#/components/schemas/{name}") });
            for example in examples {
                validate(&document, &reference, example, name);
            }
        }
    }

    #[test]
    fn every_json_body_of_every_operation_has_an_example_that_validates() {
        let document: Value = serde_json::from_str(&render()).unwrap();
        let mut checked = 0;
        let operations = document["paths"]
            .as_object()
            .unwrap()
            .iter()
            .chain(document["webhooks"].as_object().unwrap());
        for (path, item) in operations {
            for (method, operation) in item.as_object().unwrap() {
                let mut media: Vec<(String, &Value)> = Vec::new();
                if let Some(body) = operation.pointer("/requestBody/content/application~1json") {
                    media.push(("request".to_owned(), body));
                }
                for (status, response) in operation["responses"].as_object().unwrap() {
                    if let Some(body) = response.pointer("/content/application~1json") {
                        media.push((status.clone(), body));
                    }
                }
                for (what, body) in media {
                    let what = format!("{method} {path} {what}");
                    let example = body.get("example").unwrap_or_else(|| panic!("{what}"));
                    validate(&document, &body["schema"], example, &what);
                    checked += 1;
                }
            }
        }
        assert!(checked > 160, "{checked}");
    }

    #[test]
    fn an_error_example_names_the_operations_own_scope() {
        let document: Value = serde_json::from_str(&render()).unwrap();
        let forbidden = document
            .pointer(
                "/paths/~1api~1v1~1webhooks/get/responses/403/content/application~1json/example",
            )
            .unwrap();
        assert_eq!(forbidden["error"], "insufficient_scope");
        assert_eq!(forbidden["reason"], "requires scope manage:webhooks");
    }
}
