//! The checks of the documentation's examples that need no served posture: every block says
//! how it is checked, JSON examples are valid against the contract, ingest and CEF lines
//! parse, and the tests named exist.

use std::sync::LazyLock;

use serde_json::Value;

use super::{Block, Check, all_blocks};
use crate::files::project_root;

static CONTRACT: LazyLock<Value> = LazyLock::new(|| {
    serde_json::from_str(&posture_http::openapi::render()).expect("the contract is JSON")
});

/// `instance` against `schema`, whose `$ref`s point into the contract's components.
fn invalid(schema: &Value, instance: &Value) -> Vec<String> {
    let mut root = schema.clone();
    if let Some(object) = root.as_object_mut() {
        object.insert("components".to_owned(), CONTRACT["components"].clone());
    }
    let validator = match jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&root)
    {
        Ok(validator) => validator,
        Err(e) => return vec![format!("the schema does not build: {e}")],
    };
    validator
        .iter_errors(instance)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

fn component(name: &str) -> Option<Value> {
    CONTRACT["components"]["schemas"]
        .get(name)
        .map(|_| serde_json::json!({"$ref": format!("#/components/schemas/{name}")}))
}

/// The schema of an operation's response (its first 2xx unless `status` says).
fn response_schema(operation: &str, status: Option<u16>) -> Option<Value> {
    let operations = CONTRACT["paths"].as_object()?.values().flat_map(|item| {
        item.as_object()
            .into_iter()
            .flat_map(|methods| methods.values())
    });
    let found = operations
        .into_iter()
        .find(|op| op["operationId"] == operation)?;
    let responses = found["responses"].as_object()?;
    let (_, response) = responses.iter().find(|(code, _)| match status {
        Some(status) => **code == status.to_string(),
        None => code.starts_with('2'),
    })?;
    let response = match response["$ref"].as_str() {
        Some(reference) => CONTRACT.pointer(reference.strip_prefix('#')?)?,
        None => response,
    };
    response
        .pointer("/content/application~1json/schema")
        .cloned()
}

fn json_lines(block: &Block) -> Vec<&str> {
    block
        .text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// What is wrong with one check of one block.
fn problems(block: &Block, check: &Check) -> Vec<String> {
    let parsed =
        || serde_json::from_str::<Value>(&block.text).map_err(|e| format!("not JSON: {e}"));
    let against = |schema: Option<Value>, what: &str| -> Vec<String> {
        let Some(schema) = schema else {
            return vec![format!("the contract has no {what}")];
        };
        match parsed() {
            Ok(instance) => invalid(&schema, &instance),
            Err(e) => vec![e],
        }
    };
    match check {
        Check::Response { operation, status } => against(
            response_schema(operation, *status),
            &format!("response of {operation}"),
        ),
        Check::Schema(name) => against(component(name), &format!("schema {name}")),
        Check::Webhook(event) => against(
            CONTRACT["webhooks"][event]
                .pointer("/post/requestBody/content/application~1json/schema")
                .cloned(),
            &format!("webhook {event}"),
        ),
        Check::Ndjson(name) => {
            let Some(schema) = component(name) else {
                return vec![format!("the contract has no schema {name}")];
            };
            json_lines(block)
                .into_iter()
                .flat_map(|line| match serde_json::from_str::<Value>(line) {
                    Ok(instance) => invalid(&schema, &instance),
                    Err(e) => vec![format!("a line is not JSON: {e}")],
                })
                .collect()
        }
        Check::Ingest => json_lines(block)
            .into_iter()
            .filter_map(|line| {
                posture_domain::ingest::parse_line(line)
                    .err()
                    .map(|e| e.to_string())
            })
            .collect(),
        Check::Cef => json_lines(block)
            .into_iter()
            .filter(|line| posture_test_support::cef::parse(line).is_none())
            .map(|line| format!("not a CEF line: {line}"))
            .collect(),
        Check::Test(name) => {
            let needle = format!("fn {name}(");
            let found = sources().iter().any(|text| text.contains(&needle));
            if found {
                Vec::new()
            } else {
                vec![format!("no test `{name}` in the tree")]
            }
        }
        Check::Console => {
            if block.text.lines().any(|l| l.starts_with("$ ")) {
                Vec::new()
            } else {
                vec!["a console block has no `$ command` line".into()]
            }
        }
        Check::Run | Check::Output | Check::File(_) | Check::Module(_) | Check::NotRun(_) => {
            Vec::new()
        }
    }
}

/// The text of every Rust source file of the tree (for `test NAME`).
fn sources() -> Vec<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs")
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                out.push(text);
            }
        }
    }
    let mut out = Vec::new();
    for dir in ["crates", "xtask/src", "xtask/lab/src"] {
        walk(&project_root().join(dir), &mut out);
    }
    out
}

#[test]
fn every_documented_example_says_how_it_is_checked_and_passes_the_static_checks() {
    let blocks = all_blocks().unwrap_or_else(|e| panic!("{e}"));
    assert!(blocks.len() > 50, "{} blocks", blocks.len());
    let mut failures = Vec::new();
    for block in &blocks {
        for check in &block.checks {
            for problem in problems(block, check) {
                failures.push(format!("{}: {check:?}: {problem}", block.place()));
            }
        }
        if block.has(&Check::Output)
            && !blocks
                .iter()
                .any(|b| b.file == block.file && b.line < block.line && b.has(&Check::Run))
        {
            failures.push(format!("{}: output of no run block", block.place()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_block_without_a_marker_or_with_a_broken_json_example_is_caught() {
    let text = "Text.\n\n```json\n{}\n```\n\n<!-- doc-check: schema Severity -->\n```json\n\"urgent\"\n```\n";
    let found = super::blocks(std::path::Path::new("x.md"), text);
    assert!(found[0].as_ref().is_err_and(|e| e.contains("x.md:3")));
    let block = found[1].clone().unwrap();
    assert!(!problems(&block, &block.checks[0]).is_empty());
}
