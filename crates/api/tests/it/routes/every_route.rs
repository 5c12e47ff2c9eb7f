//! Rules every read route keeps, checked by walking the route table.

use posture_domain::{Scope, ScopeSet};
use posture_http::{
    input::query_generator,
    routes::{Access, Content, ENDPOINTS, Endpoint, HttpMethod},
};
use reqwest::StatusCode;

use crate::support::{TestApp, assert_error};

fn read_routes() -> impl Iterator<Item = &'static Endpoint> {
    ENDPOINTS.iter().copied().filter(|e| {
        e.method == HttpMethod::Get && !e.access.scopes().is_empty() && !e.path.contains('{')
    })
}

fn takes(endpoint: &Endpoint, param: &str) -> bool {
    let mut generator = query_generator();
    endpoint
        .query_parts()
        .iter()
        .flat_map(|part| part.params(&mut generator))
        .any(|p| p.name == param)
}

#[test]
fn every_endpoint_states_what_has_no_default() {
    let mut operation_ids = Vec::new();
    for e in ENDPOINTS {
        let what = e.operation_id;
        assert!(e.path.starts_with('/'), "{what}: path");
        assert!(!e.operation_id.is_empty(), "{}: operation id", e.path);
        assert!(
            !e.tag.is_empty() && !e.summary.is_empty(),
            "{what}: tag, summary"
        );
        assert!(!e.description.is_empty(), "{what}: description");
        assert!(!e.success.is_empty(), "{what}: success");
        assert_eq!(
            e.handler.body.is_some(),
            !e.body.is_empty(),
            "{what}: a body is described when, and only when, the handler reads one"
        );
        assert!(!operation_ids.contains(&what), "{what} is declared twice");
        operation_ids.push(what);
    }
}

#[test]
fn every_path_segment_parameter_is_declared_and_nothing_else() {
    for e in ENDPOINTS {
        let templated: Vec<&str> = e
            .path
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .collect();
        let declared: Vec<&str> = e.path_params().map(|p| p.name).collect();
        assert_eq!(templated, declared, "{}", e.path);
    }
}

#[test]
fn only_the_contract_is_public() {
    let public: Vec<&str> = ENDPOINTS
        .iter()
        .filter(|e| e.access == Access::Public)
        .map(|e| e.operation_id)
        .collect();
    assert_eq!(public, vec!["getOpenApi"]);
    let any_key: Vec<&str> = ENDPOINTS
        .iter()
        .filter(|e| e.access == Access::AnyKey)
        .map(|e| e.operation_id)
        .collect();
    assert_eq!(any_key, vec!["getCurrentKey"]);
}

#[tokio::test]
async fn every_read_route_is_403_naming_its_scope_for_a_key_with_every_other_scope() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    // A route of two scopes is 403 without either, naming the one missing.
    for endpoint in ENDPOINTS.iter() {
        for &scope in endpoint.access.scopes() {
            let others: Vec<Scope> = ScopeSet::all().iter().filter(|s| *s != scope).collect();
            let (_, key) = app.key(customer, &others).await;
            let method = reqwest::Method::from_bytes(endpoint.method.as_str().as_bytes()).unwrap();
            let path = endpoint.full_path().replace("{id}", "x");
            let response = app
                .client
                .request(method, app.url(&path))
                .bearer_auth(&key)
                .send()
                .await
                .unwrap();
            let reason = assert_error(response, StatusCode::FORBIDDEN, "insufficient_scope").await;
            assert_eq!(reason, format!("requires scope {scope}"), "{path}");
        }
    }
}

#[tokio::test]
async fn every_route_with_a_tenant_filter_is_404_for_a_foreign_tenant_and_echoes_its_own() {
    let app = TestApp::start().await;
    let (a, ta) = app.customer("A").await;
    let (_b, tb) = app.customer("B").await;
    let key = app.key_with_every_scope(a).await;
    let routes: Vec<_> = read_routes().filter(|e| takes(e, "tenant")).collect();
    assert!(
        routes.len() >= 7,
        "identities, findings, roles, upr x3, tenants"
    );
    for endpoint in routes {
        let path = endpoint.full_path();
        assert_error(
            app.get(&format!("{path}?tenant={tb}"), &key).await,
            StatusCode::NOT_FOUND,
            "not_found",
        )
        .await;
        let own = format!("{path}?tenant={}", ta.to_uppercase());
        if !matches!(endpoint.handler.answer.content, Content::Json(_)) {
            // Streams (the export) have no envelope to echo the tenant in.
            assert_eq!(app.get(&own, &key).await.status(), StatusCode::OK, "{path}");
            continue;
        }
        let body = app.get_json(&own, &key, StatusCode::OK).await;
        let echoed = body["meta"]["tenant"]
            .as_str()
            .or_else(|| body["data"]["cloudTenantId"].as_str());
        assert_eq!(echoed, Some(ta.as_str()), "{path}: {body}");
    }
}

#[tokio::test]
async fn every_list_route_has_the_envelope_and_clamps_limit() {
    let app = TestApp::start().await;
    let (a, _) = app.customer("A").await;
    let key = app.key_with_every_scope(a).await;
    // The lists paged by offset (the events feed is paged by event only: its own test).
    for endpoint in read_routes().filter(|e| takes(e, "offset")) {
        let path = endpoint.full_path();
        let body = app
            .get_json(&format!("{path}?limit=501&offset=0"), &key, StatusCode::OK)
            .await;
        assert!(body["data"].is_array(), "{path}");
        assert_eq!(body["meta"]["limit"], 500, "{path}");
        assert_eq!(body["meta"]["offset"], 0, "{path}");
        assert!(body["meta"]["total"].is_u64(), "{path}");
        assert!(body["meta"].get("tenant").is_none(), "{path}");
        let reason = assert_error(
            app.get(&format!("{path}?offset=-5"), &key).await,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        )
        .await;
        assert!(reason.starts_with("offset"), "{path}: {reason}");
    }
}

#[tokio::test]
async fn every_get_route_answers_head_as_get_without_its_body() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer_with_one_of_each("A").await;
    let key = app.key_with_every_scope(customer).await;
    let head = |path: String, tag: Option<reqwest::header::HeaderValue>| {
        let mut request = app.client.head(app.url(&path)).bearer_auth(&key);
        if let Some(tag) = tag {
            request = request.header("if-none-match", tag);
        }
        request.send()
    };
    let mut checked = 0;
    for endpoint in ENDPOINTS
        .iter()
        .filter(|e| e.method == HttpMethod::Get && !e.path.contains('{'))
    {
        let path = endpoint.full_path();
        let get = app.get(&path, &key).await;
        let answer = head(path.clone(), None).await.unwrap();
        assert_eq!(answer.status(), get.status(), "{path}");
        for name in [
            "content-type",
            "content-length",
            "etag",
            "cache-control",
            "vary",
            "x-ratelimit-limit",
            "ratelimit-policy",
        ] {
            assert_eq!(
                answer.headers().get(name),
                get.headers().get(name),
                "{path}: {name}"
            );
        }
        assert!(
            answer.headers().contains_key("x-ratelimit-remaining"),
            "{path}"
        );
        let tag = answer.headers().get("etag").cloned();
        assert!(answer.bytes().await.unwrap().is_empty(), "{path}: a body");
        // A conditional HEAD with the tag held: 304, as a GET.
        if tag.is_some() {
            let again = head(path.clone(), tag).await.unwrap();
            assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{path}");
        }
        checked += 1;
    }
    assert!(checked >= 12, "{checked} routes");
    // Without a key, HEAD is refused as GET is (no body to carry the reason).
    let refused = app
        .client
        .head(app.url("/api/v1/findings"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(refused.headers()["www-authenticate"], "Bearer");
}
