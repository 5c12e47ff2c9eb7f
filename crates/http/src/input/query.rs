//! Query strings: parsed once per request, by the route's declared parts.
//!
//! 1. A parameter no part of the route declares is a 400 naming it and the allowed ones.
//! 2. A parameter given twice is a 400 (a comma-separated list is the way to give several).
//! 3. Each part is deserialised from the whole query string; a bad value is a 400 whose
//!    reason starts with the parameter's name (`limit must be an integer from 1 to ...`).
//! 4. The parsed parts go into the request's extensions, where [`Input`] (and the list
//!    extractors of `list.rs`) take them. The parts a route parses are the ones its
//!    handler's extractors declare (`handler.rs`), so a handler cannot ask for a part that
//!    was not parsed; were one missing, it is a 500 with an `ERROR` line naming it.

use std::{
    borrow::Cow,
    future::{Ready, ready},
};

use actix_web::{FromRequest, HttpMessage, HttpRequest, dev::Extensions, dev::Payload};
use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use posture_domain::Refusal;

use crate::error::{ApiError, Refused};

/// One part of a route's query: a type whose fields are parameters.
#[derive(Clone, Copy)]
pub struct QueryPart {
    /// The part's schema: an object whose properties are the parameters.
    schema: fn(&mut SchemaGenerator) -> Schema,
    /// Parses the query string into the part and stores it in the extensions.
    parse: fn(&str, &mut Extensions) -> Result<(), ApiError>,
}

/// The query part of type `T`.
pub const fn part<T: DeserializeOwned + JsonSchema + 'static>() -> QueryPart {
    QueryPart {
        schema: part_schema::<T>,
        parse: parse_into::<T>,
    }
}

fn part_schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.root_schema_for::<T>()
}

/// A query parameter as the contract states it.
pub struct QueryParamDoc {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
    pub schema: Schema,
}

/// The generator of query schemas: everything inline.
pub fn query_generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .for_deserialize()
        .into_generator()
}

/// The schema of an optional parameter is its value's: a query string has no `null`, only
/// absence. Undoes what schemars adds for an `Option<T>` field.
fn without_null(schema: &mut Map<String, Value>) {
    let is_null = |v: &Value| v.get("type").and_then(Value::as_str) == Some("null");
    let other_branch = match schema.get("anyOf") {
        Some(Value::Array(branches)) if branches.len() == 2 && branches.iter().any(is_null) => {
            branches.iter().find(|b| !is_null(b)).cloned()
        }
        _ => None,
    };
    if let Some(Value::Object(other)) = other_branch {
        schema.remove("anyOf");
        schema.extend(other);
    }
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            schema.insert("type".to_owned(), only);
        }
    }
    if let Some(Value::Array(values)) = schema.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
}

/// A doc comment as one line (they arrive with a line break and a space per source line).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl QueryPart {
    /// The parameters of this part, in declaration order.
    pub fn params(&self, generator: &mut SchemaGenerator) -> Vec<QueryParamDoc> {
        let schema = (self.schema)(generator);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return Vec::new();
        };
        properties
            .iter()
            .map(|(name, property)| {
                let mut property = property.clone();
                let description = property.as_object_mut().and_then(|p| {
                    without_null(p);
                    p.remove("description")
                });
                let description = description.as_ref().and_then(Value::as_str).map(one_line);
                QueryParamDoc {
                    name: name.clone(),
                    description,
                    required: required.contains(&name.as_str()),
                    schema: Schema::try_from(property).expect("a property of a schema is a schema"),
                }
            })
            .collect()
    }
}

/// The names a route's parts declare.
pub(crate) fn declared_names(parts: &[QueryPart]) -> Vec<String> {
    let mut generator = query_generator();
    parts
        .iter()
        .flat_map(|part| part.params(&mut generator))
        .map(|p| p.name)
        .collect()
}

/// Whether `name` is a list parameter of these parts (a comma-separated list).
fn is_list(parts: &[QueryPart], name: &str) -> bool {
    let mut generator = query_generator();
    parts
        .iter()
        .flat_map(|part| part.params(&mut generator))
        .any(|p| p.name == name && p.schema.get("type").and_then(Value::as_str) == Some("array"))
}

/// `query` with each repeated list parameter given once, its values comma-joined in order
/// (`severity=critical&severity=high` → `severity=critical,high`): the form some generated
/// clients send for a list, whatever the contract's `explode: false` says.
fn joined_lists(query: &str) -> String {
    let mut pairs: Vec<(Cow<'_, str>, String)> = Vec::new();
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        match pairs.iter_mut().find(|(seen, _)| *seen == name) {
            Some((_, values)) => {
                values.push(',');
                values.push_str(&value);
            }
            None => pairs.push((name, value.into_owned())),
        }
    }
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter().map(|(n, v)| (n.as_ref(), v.as_str())))
        .finish()
}

/// Parses `query` into every part, refusing parameters not in `names` and repeated ones
/// (a list parameter may repeat: its values join).
pub(crate) fn parse(
    query: &str,
    parts: &[QueryPart],
    names: &[String],
    extensions: &mut Extensions,
) -> Result<(), ApiError> {
    let mut repeated_lists = false;
    let mut seen: Vec<Cow<'_, str>> = Vec::new();
    for (name, _) in form_urlencoded::parse(query.as_bytes()) {
        if !names.iter().any(|n| *n == name) {
            let allowed = if names.is_empty() {
                "this route takes no query parameters".to_owned()
            } else {
                format!("allowed: {}", names.join(", "))
            };
            let reason = format!("unknown query parameter {name:?}; {allowed}");
            return Err(ApiError::invalid(
                Refusal::Unknown,
                name.into_owned(),
                reason,
            ));
        }
        if seen.contains(&name) {
            if is_list(parts, &name) {
                repeated_lists = true;
                continue;
            }
            let reason = format!("{name} is given more than once; it takes one value");
            return Err(ApiError::invalid(
                Refusal::Repeated,
                name.into_owned(),
                reason,
            ));
        }
        seen.push(name);
    }
    let joined;
    let query = match repeated_lists {
        true => {
            joined = joined_lists(query);
            joined.as_str()
        }
        false => query,
    };
    for part in parts {
        (part.parse)(query, extensions)?;
    }
    Ok(())
}

/// The parameter every cursor is given as (a list's `after`, the event feed's).
const CURSOR: &str = "after";

/// A parsed part, waiting in the extensions for its handler.
struct Parsed<T>(T);

fn parse_into<T: DeserializeOwned + 'static>(
    query: &str,
    extensions: &mut Extensions,
) -> Result<(), ApiError> {
    let deserializer =
        || serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    // Without the parameter's path first: tracking it copies every name the part reads,
    // its own and the other parts' (a list's query is read once per part). A value that
    // fails is read again with the path, for the reason: parsing is a pure function of
    // the query string, so the second read fails the same way.
    if let Ok(value) = T::deserialize(deserializer()) {
        extensions.insert(Parsed(value));
        return Ok(());
    }
    let value: T = serde_path_to_error::deserialize(deserializer()).map_err(|e| {
        // serde_urlencoded says only "custom" (its errors carry no kind): `invalid`, but a
        // cursor (`after`) that is not even shaped as one is refused as every cursor that
        // is not this request's is: `cursor_mismatch`, start again without it.
        let path = e.path().to_string();
        let reason = e.into_inner().to_string();
        let kind = match path.as_str() {
            CURSOR => Refusal::CursorMismatch,
            _ => Refusal::Invalid,
        };
        if path == "." {
            ApiError::InvalidRequest(Refused::whole(kind, reason))
        } else {
            let reason = format!("{path} {reason}");
            ApiError::invalid(kind, path, reason)
        }
    })?;
    extensions.insert(Parsed(value));
    Ok(())
}

/// Takes the parsed part `T` out of the request (a route that does not declare it: 500).
pub(crate) fn take<T: 'static>(req: &HttpRequest) -> Result<T, ApiError> {
    req.extensions_mut()
        .remove::<Parsed<T>>()
        .map(|parsed| parsed.0)
        .ok_or_else(|| {
            tracing::error!(
                part = std::any::type_name::<T>(),
                route = req.match_pattern().as_deref().unwrap_or("?"),
                "the handler reads a query part its endpoint does not declare"
            );
            ApiError::Internal
        })
}

/// Takes the parsed part `T` if the route declares it.
pub(crate) fn take_declared<T: 'static>(req: &HttpRequest) -> Option<T> {
    req.extensions_mut()
        .remove::<Parsed<T>>()
        .map(|parsed| parsed.0)
}

/// A query part of the route, parsed: `Input(filters): Input<FindingsQuery>`.
pub struct Input<T>(pub T);

impl<T: 'static> FromRequest for Input<T> {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(take(req).map(Input))
    }
}

#[cfg(test)]
mod tests {
    use posture_wire::paging::PageQuery;

    use super::*;

    const PARTS: &[QueryPart] = &[part::<PageQuery>()];

    fn run(query: &str) -> Result<PageQuery, ApiError> {
        let names = declared_names(PARTS);
        let mut extensions = Extensions::new();
        parse(query, PARTS, &names, &mut extensions)?;
        Ok(extensions.remove::<Parsed<PageQuery>>().unwrap().0)
    }

    fn refused(query: &str) -> Refused {
        match run(query) {
            Err(ApiError::InvalidRequest(refused)) => refused,
            other => panic!("expected a 400 for {query:?}, got {:?}", other.map(|_| ())),
        }
    }

    fn reason(query: &str) -> String {
        refused(query).reason
    }

    #[test]
    fn programs_read_the_parameter_and_the_kind() {
        let of = |query: &str| {
            let refused = refused(query);
            (refused.field.map(|f| f.into_owned()), refused.kind)
        };
        let field = |f: &str| Some(f.to_owned());
        assert_eq!(of("limit=5&sort=id"), (field("sort"), Refusal::Unknown));
        assert_eq!(of("limit=5&limit=6"), (field("limit"), Refusal::Repeated));
        assert_eq!(of("limit=x"), (field("limit"), Refusal::Invalid));
        assert_eq!(of("after=%20"), (field("after"), Refusal::CursorMismatch));
    }

    #[test]
    fn the_declared_names_come_from_the_part() {
        assert_eq!(declared_names(PARTS), vec!["limit", "offset", "after"]);
    }

    #[test]
    fn an_unknown_parameter_is_refused_naming_the_allowed_ones() {
        let reason = reason("limit=5&sort=id");
        assert!(reason.contains("\"sort\""), "{reason}");
        assert!(reason.contains("allowed: limit, offset, after"), "{reason}");
    }

    #[test]
    fn a_repeated_single_value_parameter_is_refused() {
        assert!(reason("limit=5&limit=6").starts_with("limit is given more than once"));
    }

    #[test]
    fn repeated_list_parameters_join_in_order_and_others_stay() {
        assert_eq!(
            joined_lists("severity=critical&limit=5&severity=high&status=open"),
            "severity=critical%2Chigh&limit=5&status=open"
        );
    }

    #[test]
    fn a_bad_value_is_refused_with_the_parameter_name_first() {
        assert!(reason("limit=x").starts_with("limit must be an integer"));
        assert!(reason("offset=-1").starts_with("offset must be an integer from 0"));
    }

    #[test]
    fn values_are_percent_decoded() {
        let page = run("limit=%35").unwrap();
        assert_eq!(page.limit.unwrap().get(), 5);
    }
}
