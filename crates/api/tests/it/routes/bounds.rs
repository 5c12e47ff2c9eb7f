//! Every documented input is accepted at its bounds and refused just past them. The bounds
//! are read from the served document, not from the code, so the contract and the parser are
//! checked against each other: a bound the document states but the parser does not keep (or
//! the reverse) fails here.

use posture_test_support::fixtures::{finding, identity};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::TestApp;

/// What a request must get.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Accepted,
    Refused,
}

fn percent(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `schema` with a `$ref` to a component (a named closed set) and its `items`' replaced by
/// the component, the other keywords kept.
fn resolved(schema: &Value, document: &Value) -> Value {
    let inline = |schema: &Value| -> Value {
        let Some(target) = schema["$ref"].as_str() else {
            return schema.clone();
        };
        let name = target.rsplit('/').next().unwrap();
        let mut merged = document["components"]["schemas"][name].clone();
        for (key, value) in schema.as_object().unwrap() {
            if key != "$ref" {
                merged[key] = value.clone();
            }
        }
        merged
    };
    let mut schema = inline(schema);
    if schema.get("items").is_some() {
        schema["items"] = inline(&schema["items"]);
    }
    schema
}

/// The values to try for a query parameter of this schema, and what each must get.
fn cases(name: &str, schema: &Value, tenant: &str) -> Vec<(String, Expect)> {
    use Expect::*;
    let strings = |values: &Value| -> Vec<String> {
        values
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    match schema["type"].as_str() {
        Some("integer") => {
            let min = schema["minimum"]
                .as_u64()
                .unwrap_or_else(|| panic!("{name}: no minimum"));
            let max = schema["maximum"]
                .as_u64()
                .unwrap_or_else(|| panic!("{name}: an integer states its maximum"));
            let mut cases = vec![
                (min.to_string(), Accepted),
                (max.to_string(), Accepted),
                ((u128::from(max) + 1).to_string(), Refused),
                ("x".to_owned(), Refused),
                ("1.5".to_owned(), Refused),
            ];
            cases.push(match min {
                0 => ("-1".to_owned(), Refused),
                _ => ((min - 1).to_string(), Refused),
            });
            if let Some(clamp) = schema["x-clamped-maximum"].as_u64() {
                cases.push(((clamp + 1).to_string(), Accepted));
            }
            cases
        }
        Some("array") => {
            let items = &schema["items"];
            let (allowed, refused) = match (items["enum"].is_array(), items["pattern"].as_str()) {
                (true, _) => (strings(&items["enum"]), "nope".to_owned()),
                (false, Some(_)) => {
                    // An open identifier: its examples, and one newer than the document.
                    let mut allowed = strings(&items["examples"]);
                    allowed.push("zz_type_from_a_newer_analyzer".to_owned());
                    (allowed, "Not-An-Identifier".to_owned())
                }
                _ => panic!("{name}: no bounds cases for the items {items}: add them here"),
            };
            let max = schema["maxItems"]
                .as_u64()
                .unwrap_or_else(|| panic!("{name}: a list states its maxItems"))
                as usize;
            let mut cases: Vec<_> = allowed.iter().map(|v| (v.clone(), Accepted)).collect();
            cases.push((allowed[..allowed.len().min(max)].join(","), Accepted));
            cases.push((vec![allowed[0].as_str(); max].join(","), Accepted));
            cases.push((vec![allowed[0].as_str(); max + 1].join(","), Refused));
            cases.push((refused, Refused));
            if schema["minItems"] == 1 {
                cases.push((String::new(), Refused));
            }
            cases
        }
        Some("string") if schema["enum"].is_array() => {
            let mut cases: Vec<_> = strings(&schema["enum"])
                .into_iter()
                .map(|v| (v, Accepted))
                .collect();
            cases.push(("nope".to_owned(), Refused));
            cases
        }
        Some("string") if schema["format"] == "uuid" => vec![
            (tenant.to_owned(), Accepted),
            (tenant.to_uppercase(), Accepted),
            ("not-a-guid".to_owned(), Refused),
            (format!("{tenant}0"), Refused),
            (String::new(), Refused),
        ],
        Some("string") if schema["format"] == "date-time" => {
            let max = schema["maxLength"].as_u64().unwrap() as usize;
            vec![
                ("2026-11-24T06:00:00Z".to_owned(), Accepted),
                ("2026-11-24T08:00:00.123456+02:00".to_owned(), Accepted),
                ("1970-01-01T00:00:00Z".to_owned(), Accepted),
                ("2026-11-24".to_owned(), Refused),
                ("2026-13-01T00:00:00Z".to_owned(), Refused),
                ("yesterday".to_owned(), Refused),
                (String::new(), Refused),
                (format!("2026-11-24T06:00:00.{}Z", "1".repeat(max)), Refused),
            ]
        }
        // A cursor: only this server's own are accepted (tests/it/routes/cursors.rs); here,
        // what is malformed or too long.
        Some("string") if schema["pattern"] == "^[A-Za-z0-9_-]+$" => {
            let max = schema["maxLength"].as_u64().unwrap() as usize;
            vec![
                (String::new(), Refused),
                ("not a cursor!".to_owned(), Refused),
                ("A".repeat(max + 1), Refused),
                ("A".repeat(max), Refused),
            ]
        }
        _ => panic!("{name}: no bounds cases for the schema {schema}: add them here"),
    }
}

fn refused(status: StatusCode) -> bool {
    status.is_client_error()
        && ![
            StatusCode::UNAUTHORIZED,
            StatusCode::FORBIDDEN,
            StatusCode::TOO_MANY_REQUESTS,
        ]
        .contains(&status)
}

#[tokio::test]
async fn every_documented_query_parameter_is_accepted_at_its_bounds_and_refused_past_them() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer_with_one_of_each("A").await;
    let key = app.key_with_every_scope(customer).await;
    let document = app.get_public_json("/api/v1/openapi.json").await;
    let mut checked = 0;
    for (path, item) in document["paths"].as_object().unwrap() {
        let Some(get) = item.get("get") else { continue };
        if path.contains('{') {
            continue;
        }
        for param in get["parameters"].as_array().into_iter().flatten() {
            if param["in"] == "header" {
                continue;
            }
            assert_eq!(param["in"], "query", "{path}");
            let name = param["name"].as_str().unwrap();
            let schema = resolved(&param["schema"], &document);
            for (value, expect) in cases(name, &schema, &tenant) {
                let url = format!("{path}?{name}={}", percent(&value));
                let status = app.get(&url, &key).await.status();
                let got = if status == StatusCode::OK {
                    Expect::Accepted
                } else if refused(status) {
                    Expect::Refused
                } else {
                    panic!("{url}: {status}")
                };
                assert_eq!(got, expect, "{url}: {status}");
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "{checked} requests checked");
}

#[tokio::test]
async fn a_clamped_parameter_above_its_clamp_counts_as_the_clamp() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let body = app
        .get_json(
            "/api/v1/findings?limit=18446744073709551615",
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(body["meta"]["limit"], 500);
    let body = app
        .get_json(
            "/api/v1/upr/trend?days=18446744073709551615",
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(body["meta"]["days"], 365);
}

#[tokio::test]
async fn a_resource_id_is_served_at_its_longest_and_404_past_it() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer_with_one_of_each("A").await;
    let document: Value = serde_json::from_str(&posture_http::openapi::render()).unwrap();
    let id_schema = &document["paths"]["/api/v1/findings/{id}"]["get"]["parameters"][0]["schema"];
    let longest = id_schema["maxLength"].as_u64().unwrap() as usize;
    let id = "i".repeat(longest);
    app.ingest(
        customer,
        &[
            identity(&id, &tenant, "Long"),
            finding(&id, &tenant, "low", "open", &id),
        ],
    )
    .await;
    let key = app.key_with_every_scope(customer).await;
    for route in ["findings", "identities"] {
        let served = app.get(&format!("/api/v1/{route}/{id}"), &key).await;
        assert_eq!(served.status(), StatusCode::OK, "{route}");
        let past = app.get(&format!("/api/v1/{route}/{id}i"), &key).await;
        assert_eq!(past.status(), StatusCode::NOT_FOUND, "{route}");
    }
}

#[tokio::test]
async fn the_webhook_body_is_accepted_at_its_documented_lengths_and_refused_past_them() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let document: Value = serde_json::from_str(&posture_http::openapi::render()).unwrap();
    let body = &document["components"]["schemas"]["CreateWebhookRequest"]["properties"];
    let name_max = body["name"]["maxLength"].as_u64().unwrap() as usize;
    let url_max = body["webhookUrl"]["maxLength"].as_u64().unwrap() as usize;
    let url = |len: usize| {
        let base = "https://hooks.example.com/";
        format!("{base}{}", "a".repeat(len - base.len()))
    };
    let create = |name: String, webhook_url: String| {
        let app = &app;
        let key = &key;
        async move {
            app.client
                .post(app.url("/api/v1/webhooks"))
                .bearer_auth(key)
                .json(&json!({"name": name, "webhookUrl": webhook_url,
                              "webhookType": "generic", "eventTypes": ["finding_low"]}))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(
        create("n".repeat(name_max), url(url_max)).await,
        StatusCode::CREATED
    );
    assert_eq!(
        create("n".repeat(name_max + 1), url(40)).await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        create("n".into(), url(url_max + 1)).await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        create(String::new(), url(40)).await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
}

#[test]
fn the_document_and_the_domain_agree_on_webhook_names_and_urls() {
    use posture_domain::webhook::{SubscriptionRequest, TargetPolicy};

    let document: Value = serde_json::from_str(&posture_http::openapi::render()).unwrap();
    let body = &document["components"]["schemas"]["CreateWebhookRequest"]["properties"];
    let allows = |field: &str, value: &str| {
        jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&body[field])
            .unwrap()
            .is_valid(&json!(value))
    };
    let request = |name: &str, url: &str| SubscriptionRequest {
        name: name.to_owned(),
        webhook_url: url.to_owned(),
        webhook_type: "generic".to_owned(),
        event_types: vec!["finding_low".to_owned()],
    };
    let dev = TargetPolicy {
        allow_private: true,
    };
    let names = [
        "SIEM",
        " x ",
        "é日本",
        "\u{feff}",
        " ",
        "\u{3000}\u{a0}",
        "a\u{7}b",
        "\u{85}x",
        "\t",
        "x\u{9f}",
    ];
    for name in names
        .iter()
        .map(|n| n.to_string())
        .chain(["n".repeat(100), "n".repeat(101)])
    {
        let domain = request(&name, "https://hooks.example.com/")
            .validate(dev)
            .is_ok();
        assert_eq!(allows("name", &name), domain, "name {name:?}");
    }
    for url in [
        "https://hooks.example.com/x?a=1&b=%20#f",
        "http://127.0.0.1:9000/hook",
        "https://e.com/a~b!$&()*+,;=:@%41",
        "https://e.com/a\\b",
        "https://e.com/a|b",
        "https://e.com/a^b",
        "http://\\L",
        "https://e.com/%zz",
        "https://e.com:99999/",
        "https://e.com:65535/",
        "https://1/",
        "https://1.2.3.4/",
        "https://a..b/",
        "https://:80/",
        "https://[2606:4700::1111]/",
        "https://e.com?x=1",
        "https://e.com/a b",
        "https://e.com/é",
        "https://bücher.example/",
        "https://e.com/{x}",
        "https://e.com/?q='1'",
        "https://e.com/\"",
        "https://e.com/<>",
        "https://e.com/`",
        "ftp://e.com/",
        "https://e.com/\u{7f}",
    ] {
        let domain = request("n", url).validate(dev).is_ok();
        assert_eq!(allows("webhookUrl", url), domain, "url {url:?}");
    }
}
