//! Generated JSON values: any shape, nested a few levels, with hostile strings.

use proptest::prelude::*;
use serde_json::Value;

/// Strings an attacker would try: any Unicode, controls, quotes, escapes, long runs.
pub fn hostile_string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\\x00-\\x1f\"\\\\\u{85}\u{2028}\u{2029}a-z ]{0,40}",
        "\\PC{0,20}",
        (1usize..3000).prop_map(|n| "x".repeat(n)),
    ]
}

/// Any JSON value, up to 3 levels deep.
pub fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        hostile_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,12}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
