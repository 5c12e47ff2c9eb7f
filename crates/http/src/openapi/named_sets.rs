//! Query parameters whose values are a closed set (`severity`, `status`...) point at the
//! set's named component in the rendered contract (`{"$ref": "#/components/schemas/Severity"}`),
//! so a generated client takes the same `Severity` type in a filter as it reads in a
//! response. The query schemas are generated inline (the service parses with them), each
//! closed set marked with its name ([`posture_wire::CLOSED_SET_MARKER`]); the marker never
//! reaches the document.

use posture_wire::CLOSED_SET_MARKER;
use serde_json::{Map, Value, json};

/// Replaces each marked inline set by a reference to its component, when the document has
/// one, and removes every marker.
pub fn point_at_components(document: &mut Value) {
    let names: Vec<String> = document["components"]["schemas"]
        .as_object()
        .map(|schemas| schemas.keys().cloned().collect())
        .unwrap_or_default();
    let Some(paths) = document["paths"].as_object_mut() else {
        return;
    };
    for parameters in paths
        .values_mut()
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut())
        .filter_map(|operation| operation.get_mut("parameters"))
        .filter_map(Value::as_array_mut)
    {
        for parameter in parameters {
            if let Some(schema) = parameter.get_mut("schema").and_then(Value::as_object_mut) {
                rewrite(schema, &names);
                if let Some(items) = schema.get_mut("items").and_then(Value::as_object_mut) {
                    rewrite(items, &names);
                }
            }
        }
    }
}

fn rewrite(schema: &mut Map<String, Value>, names: &[String]) {
    let Some(Value::String(name)) = schema.remove(CLOSED_SET_MARKER) else {
        return;
    };
    if names.contains(&name) {
        schema.remove("type");
        schema.remove("enum");
        schema.insert(
            "$ref".to_owned(),
            json!(format!("#/components/schemas/{name}")),
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use crate::openapi::render;

    #[test]
    fn closed_set_filters_refer_to_the_named_sets_and_no_marker_is_left() {
        let text = render();
        assert!(!text.contains(posture_wire::CLOSED_SET_MARKER));
        let document: Value = serde_json::from_str(&text).unwrap();
        let parameter = |path: &str, name: &str| {
            document["paths"][path]["get"]["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .unwrap()["schema"]
                .clone()
        };
        let severity = parameter("/api/v1/findings", "severity");
        assert_eq!(severity["items"]["$ref"], "#/components/schemas/Severity");
        assert_eq!(severity["maxItems"], 32);
        let status = parameter("/api/v1/webhooks/{id}/deliveries", "status");
        assert_eq!(status["$ref"], "#/components/schemas/DeliveryStatus");
        // A set no response uses (the list order) stays inline.
        assert!(parameter("/api/v1/findings", "order")["enum"].is_array());
    }
}
