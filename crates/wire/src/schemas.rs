//! The schemas of values the wire types share: closed sets, ids, event types.

use posture_domain::ClosedSet;
use schemars::{Schema, SchemaGenerator, json_schema};

/// The schema of a closed set of strings (severity, kind...): a named component
/// (`{"$ref": "#/components/schemas/Severity"}`, defined once as
/// `{"type":"string","enum":[...]}`), so generated clients get one named type per set; inline
/// where the generator inlines everything (query parameters).
pub fn closed_set<T: ClosedSet>(generator: &mut SchemaGenerator) -> Schema {
    if generator.settings().inline_subschemas {
        return inline_closed_set::<T>();
    }
    let name = closed_set_name::<T>();
    let mut named = json_schema!({ "type": "string", "enum": T::allowed() });
    named.insert(
        "description".to_owned(),
        format!(
            "The values of `{}`: {}.",
            T::WHAT,
            T::allowed()
                .iter()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
        .into(),
    );
    generator
        .definitions_mut()
        .insert(name.clone(), named.to_value());
    let path = generator.settings().definitions_path.clone();
    Schema::new_ref(format!("#{path}/{name}"))
}

/// The name of a closed set's component schema: its type's name (`Severity`).
pub fn closed_set_name<T>() -> String {
    std::any::type_name::<T>()
        .rsplit("::")
        .next()
        .unwrap_or("ClosedSet")
        .to_owned()
}

/// The marker an inline closed set carries (query parameters), so the rendered contract can
/// point it at the set's named component: `"x-posture-enum": "Severity"`.
pub const CLOSED_SET_MARKER: &str = "x-posture-enum";

/// A closed set inline, marked with its name.
pub fn inline_closed_set<T: ClosedSet>() -> Schema {
    json_schema!({
        "type": "string",
        "enum": T::allowed(),
        CLOSED_SET_MARKER: closed_set_name::<T>(),
    })
}

/// The schema of a value of a closed set, or `null`.
pub fn nullable_closed_set<T: ClosedSet>(generator: &mut SchemaGenerator) -> Schema {
    let value = closed_set::<T>(generator);
    json_schema!({ "anyOf": [value, { "type": "null" }] })
}

/// The schema of a list of values of a closed set.
pub fn closed_set_list<T: ClosedSet>(generator: &mut SchemaGenerator) -> Schema {
    let item = closed_set::<T>(generator);
    json_schema!({ "type": "array", "items": item })
}

/// The schema of a finding type: an open identifier, the known catalogue as examples.
pub fn finding_type(_: &mut SchemaGenerator) -> Schema {
    use posture_domain::finding::{FINDING_TYPE_PATTERN, FindingType, MAX_FINDING_TYPE_LEN};
    let examples: Vec<&str> = FindingType::CATALOGUE
        .iter()
        .map(|(name, _)| *name)
        .collect();
    json_schema!({
        "type": "string",
        "pattern": FINDING_TYPE_PATTERN,
        "maxLength": MAX_FINDING_TYPE_LEN,
        "examples": examples,
        "description": "An open identifier: the analyzer may report types newer than this \
                        document; the ones posture knows are given as examples (catalogue in \
                        docs/api.md)."
    })
}

/// The schema of a cloud tenant id (a lowercase hyphenated GUID).
pub fn tenant_id(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "uuid" })
}

/// The schema of a cloud tenant id or `null`.
pub fn nullable_tenant_id(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": ["string", "null"], "format": "uuid" })
}

/// The schema of a UUID.
pub fn uuid(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "uuid" })
}

/// The schema of the event types of a create request: a non-empty list.
pub fn event_types_request(generator: &mut SchemaGenerator) -> Schema {
    let item = closed_set::<posture_domain::webhook::EventType>(generator);
    json_schema!({ "type": "array", "minItems": 1, "items": item })
}
