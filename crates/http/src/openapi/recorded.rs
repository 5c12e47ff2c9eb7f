//! The examples the service itself answered: `recorded.json` holds, for every operation that
//! answers JSON, the body it gave for a realistic customer, and one delivery of each event
//! type as a receiver got it, in a canonical form (recorded by the api crate's
//! `recorded_examples` test, which fails when the service answers otherwise).
//!
//! An operation's success example is its recorded body; a webhook's example is its recorded
//! delivery; and a component schema met inside a recorded body takes the value found there
//! as its example (the first met), so that a `WebhookResponse` example is a subscription the
//! service really served — its `status`, `disabledReason` and secret as they go together.

use std::sync::LazyLock;

use indexmap::IndexMap;
use serde_json::Value;

/// The recorded responses and deliveries (`Null` if the file were not JSON: a test fails).
pub(super) static RECORDED: LazyLock<Value> =
    LazyLock::new(|| serde_json::from_str(include_str!("recorded.json")).unwrap_or(Value::Null));

/// The recorded body of an operation answering `status`.
pub(super) fn response(operation_id: &str, status: &str) -> Option<Value> {
    let recorded = RECORDED["operations"].get(operation_id)?;
    let recorded_status = recorded["status"].as_u64()?;
    (status.parse::<u64>().ok()? == recorded_status).then(|| recorded["body"].clone())
}

/// The recorded delivery of an event type.
pub(super) fn delivery(event: &str) -> Option<Value> {
    RECORDED["webhooks"].get(event).cloned()
}

/// Deepest schema nesting followed (posture's schemas nest a few levels).
const MAX_DEPTH: usize = 24;

/// Walks a recorded body along its schema, noting the first value met for each component.
struct Harvest<'a> {
    components: &'a IndexMap<String, Value>,
    found: IndexMap<String, Value>,
}

impl Harvest<'_> {
    fn walk(&mut self, schema: &Value, instance: &Value, depth: usize) {
        if depth > MAX_DEPTH || instance.is_null() {
            return;
        }
        if let Some(target) = schema["$ref"].as_str() {
            let name = target.rsplit('/').next().unwrap_or_default();
            if let Some(component) = self.components.get(name) {
                self.found
                    .entry(name.to_owned())
                    .or_insert_with(|| instance.clone());
                self.walk(component, instance, depth + 1);
            }
            return;
        }
        for union in ["anyOf", "oneOf"] {
            if let Some(branches) = schema[union].as_array() {
                // A nullable value: its one other branch. A union of several shapes is left
                // alone (which branch the value is would take a validator).
                let mut others = branches.iter().filter(|b| b["type"] != "null");
                if let (Some(branch), None) = (others.next(), others.next()) {
                    self.walk(branch, instance, depth + 1);
                }
                return;
            }
        }
        match instance {
            Value::Object(object) => {
                if let Some(properties) = schema["properties"].as_object() {
                    for (field, value) in object {
                        if let Some(property) = properties.get(field) {
                            self.walk(property, value, depth + 1);
                        }
                    }
                }
                if schema["additionalProperties"].is_object() {
                    for value in object.values() {
                        self.walk(&schema["additionalProperties"], value, depth + 1);
                    }
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.walk(&schema["items"], item, depth + 1);
                }
            }
            _ => {}
        }
    }
}

/// The examples of the components met in the recorded bodies of `document` (before its
/// component schemas are annotated).
pub(super) fn component_examples(
    document: &Value,
    components: &IndexMap<String, Value>,
) -> IndexMap<String, Value> {
    let mut harvest = Harvest {
        components,
        found: IndexMap::new(),
    };
    let operations = document["paths"]
        .as_object()
        .into_iter()
        .flat_map(|paths| paths.values())
        .filter_map(Value::as_object)
        .flat_map(|item| item.values());
    for operation in operations {
        let Some(id) = operation["operationId"].as_str() else {
            continue;
        };
        for (status, response) in operation["responses"].as_object().into_iter().flatten() {
            if let (Some(body), Some(schema)) = (
                self::response(id, status),
                response.pointer("/content/application~1json/schema"),
            ) {
                harvest.walk(schema, &body, 0);
            }
        }
    }
    for (event, item) in document["webhooks"].as_object().into_iter().flatten() {
        if let (Some(body), Some(schema)) = (
            delivery(event),
            item.pointer("/post/requestBody/content/application~1json/schema"),
        ) {
            harvest.walk(schema, &body, 0);
        }
    }
    harvest.found
}

#[cfg(test)]
mod tests {
    use super::RECORDED;

    #[test]
    fn the_recorded_file_holds_operations_and_deliveries() {
        assert!(
            RECORDED["operations"]
                .as_object()
                .is_some_and(|o| o.len() > 15)
        );
        assert_eq!(RECORDED["webhooks"].as_object().map(|w| w.len()), Some(8));
    }
}
