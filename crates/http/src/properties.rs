//! Property tests of the request inputs against the contract they are declared with.
//!
//! * Query strings: every value a route's parameter schema allows is accepted; a value of
//!   a strict parameter (integer, enumeration, list) is accepted exactly when the schema's
//!   rule holds; any query string at all is accepted or a 400 whose reason names the
//!   parameter. The parameters and their schemas are read from the route table, so a new
//!   parameter is covered (or fails here until its kind can be generated).
//! * `POST /webhooks` bodies: any bytes decode or are a 400/422; a body is accepted (decoded
//!   and validated) exactly when the contract's `CreateWebhookRequest` schema holds, with
//!   private targets allowed (the contract cannot say "a public address"); with them
//!   refused, whatever is accepted still fits the contract.
//! * `If-Match`: every value the contract's pattern allows is read (never a 400); a comma
//!   inside a tag is outside the pattern.

use std::sync::LazyLock;

use actix_web::dev::Extensions;
use posture_domain::{
    Refusal,
    webhook::{SubscriptionRequest, TargetPolicy},
};
use posture_wire::webhooks::CreateWebhookRequest;
use proptest::{prelude::*, strategy::BoxedStrategy};
use regex::Regex;
use serde_json::{Value, json};

use crate::{
    error::ApiError,
    input::{declared_names, decode, parse_query as parse, query_generator},
    routes::{ENDPOINTS, Endpoint},
};

/// A route and its query parameters with their schemas, from the route table.
struct Route {
    endpoint: &'static Endpoint,
    names: Vec<String>,
    params: Vec<(String, Value)>,
}

static ROUTES: LazyLock<Vec<Route>> = LazyLock::new(|| {
    ENDPOINTS
        .iter()
        .map(|endpoint| {
            let mut generator = query_generator();
            let params = endpoint
                .query_parts()
                .iter()
                .flat_map(|part| part.params(&mut generator))
                .map(|p| (p.name, serde_json::to_value(&p.schema).expect("a schema")))
                .collect();
            Route {
                endpoint,
                names: declared_names(&endpoint.query_parts()),
                params,
            }
        })
        .collect()
});

fn parse_on(route: &Route, query: &str) -> Result<(), ApiError> {
    parse(
        query,
        &route.endpoint.query_parts(),
        &route.names,
        &mut Extensions::new(),
    )
}

fn query_of(pairs: impl IntoIterator<Item = (String, String)>) -> String {
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        serializer.append_pair(&name, &value);
    }
    serializer.finish()
}

fn bound(schema: &Value, key: &str, default: u64) -> u64 {
    schema[key].as_u64().unwrap_or(default)
}

/// The values `schema` allows, as they appear in a query string.
fn valid_value(schema: &Value) -> BoxedStrategy<String> {
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        return prop::sample::select(values).boxed();
    }
    match schema["type"].as_str() {
        Some("integer") => {
            let (min, max) = (
                bound(schema, "minimum", 0),
                bound(schema, "maximum", u64::MAX),
            );
            // The bounds themselves as often as values near the minimum and anywhere.
            prop_oneof![Just(min), Just(max), min..=max.min(min + 1000), min..=max]
                .prop_map(|n| n.to_string())
                .boxed()
        }
        Some("array") => {
            let (min, max) = (bound(schema, "minItems", 0), bound(schema, "maxItems", 32));
            prop::collection::vec(valid_value(&schema["items"]), min as usize..=max as usize)
                .prop_map(|items| items.join(","))
                .boxed()
        }
        Some("string") if schema["format"] == "uuid" => any::<u128>()
            .prop_map(|n| uuid::Uuid::from_u128(n).to_string())
            .boxed(),
        Some("string") if schema["format"] == "date-time" => {
            // Any second from year 1 to 9999, in UTC or at an offset, with or without a
            // fraction.
            (
                -62_135_596_800i64..253_402_300_799,
                0u32..1_000_000,
                -23i32..=23,
                any::<bool>(),
            )
                .prop_map(|(secs, micros, hours, fraction)| {
                    let time =
                        chrono::DateTime::from_timestamp(secs, micros * 1000).expect("in range");
                    let offset = chrono::FixedOffset::east_opt(hours * 3600).expect("in range");
                    let format = if fraction {
                        chrono::SecondsFormat::Micros
                    } else {
                        chrono::SecondsFormat::Secs
                    };
                    time.with_timezone(&offset).to_rfc3339_opts(format, true)
                })
                .boxed()
        }
        Some("string") if schema["pattern"].is_string() => {
            let pattern = schema["pattern"].as_str().unwrap_or_default();
            let body = pattern.trim_start_matches('^').trim_end_matches('$');
            let max = bound(schema, "maxLength", u64::MAX) as usize;
            proptest::string::string_regex(body)
                .expect("a pattern proptest can generate")
                .prop_filter("within maxLength", move |s| s.len() <= max)
                .boxed()
        }
        _ => panic!("no generator for the parameter schema {schema}: teach valid_value"),
    }
}

/// Whether `value` is in the language of `schema`, decided here without the parser; `None`
/// for parameters that are lenient by design (`tenant`: an id that is not a GUID matches no
/// tenant, docs/api.md).
fn allowed(schema: &Value, value: &str) -> Option<bool> {
    if let Some(values) = schema["enum"].as_array() {
        return Some(values.iter().any(|v| v.as_str() == Some(value)));
    }
    match schema["type"].as_str() {
        Some("integer") => {
            let digits = value.strip_prefix('+').unwrap_or(value);
            let (min, max) = (
                bound(schema, "minimum", 0),
                bound(schema, "maximum", u64::MAX),
            );
            Some(
                !digits.is_empty()
                    && digits.bytes().all(|b| b.is_ascii_digit())
                    && digits
                        .parse::<u128>()
                        .is_ok_and(|n| (u128::from(min)..=u128::from(max)).contains(&n)),
            )
        }
        Some("array") => {
            // Spaces around an item are ignored (docs/api.md), nothing else.
            let items: Vec<&str> = value
                .split(',')
                .map(|item| item.trim_matches(' '))
                .collect();
            let (min, max) = (bound(schema, "minItems", 0), bound(schema, "maxItems", 32));
            let mut each = true;
            for item in &items {
                each &= allowed(&schema["items"], item)?;
            }
            Some(each && (min..=max).contains(&(items.len() as u64)))
        }
        Some("string") if schema["format"] == "uuid" => None,
        // RFC 3339's grammar is chrono's to parse; its bounds are tested in tests/it.
        Some("string") if schema["format"] == "date-time" => None,
        Some("string") => {
            let pattern = Regex::new(schema["pattern"].as_str()?).ok()?;
            let length = value.len() as u64;
            Some(
                pattern.is_match(value)
                    && length >= bound(schema, "minLength", 0)
                    && length <= bound(schema, "maxLength", u64::MAX),
            )
        }
        _ => None,
    }
}

/// Strings a client might send by mistake or on purpose.
fn hostile() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ -~]{0,40}",
        "[\\x00-\\x1f\u{7f}-\u{a0}\u{2000}-\u{200b}\u{2028}\u{3000}a-z ]{0,10}",
        "[0-9+-]{0,25}",
        prop::sample::select(vec![
            "0",
            "1",
            "-1",
            "100",
            "101",
            "365",
            "366",
            "500",
            "501",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
        ])
        .prop_map(str::to_owned),
        "(critical|high|low|open|cef|ndjson|[a-z_]{0,8}|),{0,3}[a-zA-Z_,]{0,20}",
        (1usize..4000).prop_map(|n| "9".repeat(n)),
    ]
}

fn routes_with_params() -> Vec<usize> {
    (0..ROUTES.len())
        .filter(|i| !ROUTES[*i].params.is_empty())
        .collect()
}

/// A route, and a query of some of its parameters with values their schemas allow.
fn valid_query() -> impl Strategy<Value = (usize, String)> {
    prop::sample::select(routes_with_params()).prop_flat_map(|i| {
        let values: Vec<_> = ROUTES[i]
            .params
            .iter()
            .map(|(name, schema)| {
                let name = name.clone();
                prop::option::of(valid_value(schema))
                    .prop_map(move |v| v.map(|v| (name.clone(), v)))
            })
            .collect();
        (Just(i), values).prop_map(|(i, pairs)| (i, query_of(pairs.into_iter().flatten())))
    })
}

/// A reason for a refused query: it names the parameter (or says which are allowed).
fn check_refusal(route: &Route, query: &str, error: ApiError) -> Result<(), TestCaseError> {
    let ApiError::InvalidRequest(refused) = error else {
        return Err(TestCaseError::fail(format!(
            "{query:?}: not a 400: {error:?}"
        )));
    };
    // For programs: the parameter, one the route takes unless it is the unknown one.
    let field = refused.field.as_deref().unwrap_or_default();
    prop_assert!(
        refused.kind == Refusal::Unknown || route.names.iter().any(|n| n == field),
        "{query:?}: field {field:?} ({:?})",
        refused.kind
    );
    let reason = refused.reason;
    prop_assert!(
        reason.len() <= 4 * query.len() + 1024,
        "a reason of {} bytes for a query of {}",
        reason.len(),
        query.len()
    );
    let names_one = route.names.iter().any(|n| reason.starts_with(n.as_str()));
    prop_assert!(
        names_one
            || reason.starts_with("unknown query parameter")
            || reason.contains("more than once"),
        "{query:?}: {reason}"
    );
    Ok(())
}

proptest! {
    #[test]
    fn every_value_the_contract_allows_is_accepted((i, query) in valid_query()) {
        let route = &ROUTES[i];
        if let Err(e) = parse_on(route, &query) {
            prop_assert!(false, "{} ?{query}: {e:?}", route.endpoint.path);
        }
    }

    #[test]
    fn a_strict_parameter_is_accepted_exactly_when_its_schema_allows_the_value(
        (i, param, value) in prop::sample::select(routes_with_params()).prop_flat_map(|i| {
            (Just(i), 0..ROUTES[i].params.len())
        }).prop_flat_map(|(i, param)| {
            let schema = &ROUTES[i].params[param].1;
            (Just(i), Just(param), prop_oneof![valid_value(schema), hostile()])
        }),
    ) {
        let route = &ROUTES[i];
        let (name, schema) = &route.params[param];
        let Some(expected) = allowed(schema, &value) else {
            return Ok(());
        };
        let query = query_of([(name.clone(), value.clone())]);
        match parse_on(route, &query) {
            Ok(()) => prop_assert!(expected, "{name}={value:?} was accepted"),
            Err(error) => {
                prop_assert!(!expected, "{name}={value:?} was refused: {error:?}");
                check_refusal(route, &query, error)?;
            }
        }
    }

    #[test]
    fn any_query_string_is_accepted_or_refused_naming_the_parameter(
        i in 0..ROUTES.len(),
        raw in prop_oneof![
            "[ -~]{0,120}",
            prop::collection::vec(
                (
                    prop_oneof![
                        prop::sample::select(vec!["limit", "offset", "severity", "status",
                            "findingType", "tenant", "format", "days", "minScore"])
                            .prop_map(str::to_owned),
                        "[a-zA-Z%\\[\\]._]{0,12}",
                    ],
                    hostile(),
                ),
                0..5,
            )
            .prop_map(query_of),
        ],
    ) {
        let route = &ROUTES[i];
        if let Err(error) = parse_on(route, &raw) {
            check_refusal(route, &raw, error)?;
        }
    }
}

/// The contract's `CreateWebhookRequest` schema, with the document's components.
static CREATE_BODY: LazyLock<jsonschema::Validator> = LazyLock::new(|| {
    let document: Value = serde_json::from_str(&crate::openapi::render()).expect("the document");
    let root = json!({
        "$ref": "#/components/schemas/CreateWebhookRequest",
        "components": document["components"],
    });
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&root)
        .expect("a schema")
});

fn accepted(body: &Value, policy: TargetPolicy) -> bool {
    decode::<CreateWebhookRequest>(body.to_string().as_bytes())
        .is_ok_and(|request| SubscriptionRequest::from(request).validate(policy).is_ok())
}

/// A valid body with, most of the time, one change: a field replaced by any value of its
/// type or of another type, removed, or an unknown field added.
fn create_body() -> impl Strategy<Value = Value> {
    let valid = (
        "[A-Za-z0-9][A-Za-z0-9 ._-]{0,40}",
        "https://[a-z]{1,10}\\.(com|example|io)(:[1-9][0-9]{0,3})?(/[a-zA-Z0-9._~-]{0,10}){0,3}",
        prop::sample::select(vec!["generic", "slack", "teams"]),
        prop::collection::vec(prop::sample::select(EVENTS.to_vec()), 1..5),
    )
        .prop_map(|(name, url, kind, events)| {
            json!({"name": name, "webhookUrl": url, "webhookType": kind, "eventTypes": events})
        });
    let url = prop_oneof![
        "(https?|ftp)://[ -~]{0,30}",
        "https://(127\\.0\\.0\\.1|\\[::1\\]|10\\.[0-9]\\.0\\.1|user:pw@h\\.com)/x",
        "https://[a-z0-9.-]{1,20}(:[0-9]{1,6})?/[ -~]{0,20}",
        hostile(),
    ];
    let event = prop_oneof![
        3 => prop::sample::select(EVENTS.to_vec()).prop_map(str::to_owned),
        1 => hostile(),
    ];
    let change = prop_oneof![
        hostile().prop_map(|v| ("name", Some(Value::from(v)))),
        url.prop_map(|v| ("webhookUrl", Some(Value::from(v)))),
        hostile().prop_map(|v| ("webhookType", Some(Value::from(v)))),
        prop::collection::vec(event, 0..5).prop_map(|v| ("eventTypes", Some(Value::from(v)))),
        (
            prop::sample::select(vec!["name", "webhookUrl", "webhookType", "eventTypes"]),
            prop_oneof![
                Just(json!(7)),
                Just(json!(null)),
                Just(json!(["x"])),
                Just(json!({}))
            ],
        )
            .prop_map(|(field, value)| (field, Some(value))),
        prop::sample::select(vec!["name", "webhookUrl", "webhookType", "eventTypes"])
            .prop_map(|field| (field, None)),
        Just(("secret", Some(json!("mine")))),
    ];
    (valid, prop::option::weighted(0.85, change)).prop_map(|(mut body, change)| {
        if let (Some((field, value)), Some(object)) = (change, body.as_object_mut()) {
            match value {
                Some(value) => object.insert(field.to_owned(), value),
                None => object.remove(field),
            };
        }
        body
    })
}

const EVENTS: [&str; 4] = [
    "finding_critical",
    "finding_high",
    "finding_medium",
    "finding_low",
];

/// Values of `If-Match` the contract allows, generated from its pattern.
fn if_match_value() -> BoxedStrategy<String> {
    let pattern = crate::preconditions::IF_MATCH_PATTERN
        .trim_start_matches('^')
        .trim_end_matches('$');
    proptest::string::string_regex(pattern)
        .expect("the If-Match pattern generates")
        .boxed()
}

fn if_match_of(value: &str) -> Result<Option<Vec<u32>>, ApiError> {
    let req = actix_web::test::TestRequest::default()
        .insert_header(("If-Match", value))
        .to_http_request();
    crate::preconditions::if_match(&req)
}

#[test]
fn an_if_match_tag_with_a_comma_is_outside_the_contract() {
    let pattern = Regex::new(crate::preconditions::IF_MATCH_PATTERN).expect("a regex");
    for value in ["W/\",ZOC\"", "\"v1,\"", "\"a\", W/\"b,c\""] {
        assert!(!pattern.is_match(value), "{value}");
    }
    assert!(if_match_of("W/\",ZOC\"").is_err());
    for value in ["W/\"ZOC\"", "\"v3\"", "*", "\"v1\", W/\"v2\"", ""] {
        assert!(pattern.is_match(value), "{value}");
        assert!(if_match_of(value).is_ok(), "{value}");
    }
}

proptest! {
    #[test]
    fn every_if_match_the_contract_allows_is_read(value in if_match_value()) {
        prop_assert!(if_match_of(&value).is_ok(), "{:?}", value);
    }

    #[test]
    fn any_bytes_are_a_body_or_a_400_or_a_422(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..512),
            "\\{\"[a-zA-Z]{0,12}\":[ -~]{0,40}".prop_map(String::into_bytes),
        ],
    ) {
        match decode::<CreateWebhookRequest>(&bytes) {
            Ok(_) | Err(ApiError::InvalidRequest(_) | ApiError::Unprocessable(_)) => {}
            Err(other) => prop_assert!(false, "{other:?}"),
        }
    }

    #[test]
    fn a_create_body_is_accepted_exactly_when_the_contract_allows_it(body in create_body()) {
        let contract = CREATE_BODY.is_valid(&body);
        let development = accepted(&body, TargetPolicy { allow_private: true });
        prop_assert_eq!(development, contract, "{}", body);
        if accepted(&body, TargetPolicy::default()) {
            prop_assert!(contract, "accepted outside the contract: {}", body);
        }
    }
}
