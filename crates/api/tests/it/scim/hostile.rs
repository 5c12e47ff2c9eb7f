//! What an outsider may send to `/scim/v2`: each refusal a 4xx in SCIM's shape, nothing
//! kept of it.

use posture_domain::Scope;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Scim, assert_scim_error};
use crate::support::TestApp;

#[tokio::test]
async fn malformed_filters_are_invalid_filter() {
    let scim = Scim::start().await;
    for filter in [
        "userName",
        "userName%20co%20%22a%22",
        "userName%20eq%20%22a%22%20or%20userName%20eq%20%22b%22",
        "userName%20eq%20%22unclosed",
        "password%20eq%20%22x%22",
        "%22%5C",
        &"a".repeat(2_000),
    ] {
        let response = scim
            .send(Method::GET, &format!("/Users?filter={filter}"), None)
            .await;
        assert_scim_error(response, StatusCode::BAD_REQUEST, Some("invalidFilter")).await;
    }
    let response = scim
        .send(Method::GET, "/Users?startIndex=first", None)
        .await;
    assert_scim_error(response, StatusCode::BAD_REQUEST, Some("invalidValue")).await;
}

#[tokio::test]
async fn huge_and_malformed_bodies_are_refused_and_change_nothing() {
    let scim = Scim::start().await;
    let user = scim.create_user("ada").await;
    let path = format!("/Users/{}", user["id"].as_str().unwrap());
    let operations: Vec<Value> = (0..1_001)
        .map(|_| json!({"op": "replace", "path": "displayName", "value": "x"}))
        .collect();
    let response = scim
        .send(
            Method::PATCH,
            &path,
            Some(json!({"Operations": operations})),
        )
        .await;
    assert_scim_error(response, StatusCode::BAD_REQUEST, Some("invalidSyntax")).await;
    let huge = json!({"userName": "x".repeat(2 * 1024 * 1024)});
    let response = scim.send(Method::POST, "/Users", Some(huge)).await;
    assert_scim_error(response, StatusCode::PAYLOAD_TOO_LARGE, None).await;
    let response = scim
        .app
        .client
        .post(scim.app.url("/scim/v2/Users"))
        .bearer_auth(&scim.key)
        .header("content-type", "application/scim+json")
        .body("{\"userName\": ")
        .send()
        .await
        .unwrap();
    assert_scim_error(response, StatusCode::BAD_REQUEST, Some("invalidSyntax")).await;
    let response = scim
        .app
        .client
        .post(scim.app.url("/scim/v2/Users"))
        .bearer_auth(&scim.key)
        .header("content-type", "text/plain")
        .body("{\"userName\": \"x\"}")
        .send()
        .await
        .unwrap();
    assert_scim_error(response, StatusCode::UNSUPPORTED_MEDIA_TYPE, None).await;
    for body in [
        json!({"userName": 7}),
        json!({"userName": "a", "emails": [{"value": "a@x", "primary": true}, {"value": "b@x", "primary": true}]}),
        json!({"userName": "a\u{0000}b"}),
        json!({"userName": "x".repeat(257)}),
    ] {
        let response = scim.send(Method::POST, "/Users", Some(body.clone())).await;
        assert_scim_error(response, StatusCode::BAD_REQUEST, Some("invalidValue")).await;
    }
    let response = scim
        .send(Method::PATCH, &path, Some(json!({"Operations": [{"op": "replace", "path": "emails[type eq work].value", "value": "x"}]})))
        .await;
    assert_scim_error(response, StatusCode::BAD_REQUEST, Some("invalidPath")).await;
    let response = scim
        .send(
            Method::PATCH,
            &path,
            Some(json!({"Operations": [{"op": "remove"}]})),
        )
        .await;
    assert_scim_error(response, StatusCode::BAD_REQUEST, Some("noTarget")).await;
    let listed = scim.call(Method::GET, "/Users", None, StatusCode::OK).await;
    assert_eq!(listed["totalResults"], 1);
    assert_eq!(listed["Resources"][0], user, "nothing changed");
}

#[tokio::test]
async fn attributes_posture_does_not_keep_are_accepted_and_not_shown() {
    let scim = Scim::start().await;
    let created = scim
        .call(
            Method::POST,
            "/Users",
            Some(json!({
                "userName": "ada",
                "title": "Countess",
                "password": "hunter2",
                "phoneNumbers": [{"value": "+44 20 7946 0000", "type": "work"}],
                "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {"department": "R&D"},
            })),
            StatusCode::CREATED,
        )
        .await;
    let mut keys: Vec<&str> = created
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["id", "meta", "schemas", "userName"], "{created}");
    for kept_out in [
        "title",
        "password",
        "phoneNumbers",
        "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User",
    ] {
        assert!(created.get(kept_out).is_none(), "{kept_out}: {created}");
    }
}

#[tokio::test]
async fn odd_paths_and_methods_are_answered_in_scims_shape() {
    let scim = Scim::start().await;
    let response = scim.send(Method::GET, "/Users/not-a-uuid", None).await;
    assert_scim_error(response, StatusCode::NOT_FOUND, None).await;
    let response = scim.send(Method::GET, "/Nothing", None).await;
    assert_scim_error(response, StatusCode::NOT_FOUND, None).await;
    let response = scim
        .send(Method::POST, "/ServiceProviderConfig", Some(json!({})))
        .await;
    assert_eq!(response.headers()["allow"], "GET");
    assert_scim_error(response, StatusCode::METHOD_NOT_ALLOWED, None).await;
    let response = scim
        .send(Method::POST, "/Schemas/urn:nothing", Some(json!({})))
        .await;
    assert_scim_error(response, StatusCode::METHOD_NOT_ALLOWED, None).await;
    let response = scim.send(Method::GET, "/Schemas/urn:nothing", None).await;
    assert_scim_error(response, StatusCode::NOT_FOUND, None).await;
    let response = scim.send(Method::DELETE, "/Users", None).await;
    assert_eq!(response.headers()["allow"], "GET, POST");
    assert_scim_error(response, StatusCode::METHOD_NOT_ALLOWED, None).await;
}

#[tokio::test]
async fn forwarding_headers_of_an_untrusted_client_do_not_choose_the_location() {
    let scim = Scim::start().await;
    let response = scim
        .app
        .client
        .post(scim.app.url("/scim/v2/Users"))
        .bearer_auth(&scim.key)
        .header("content-type", "application/scim+json")
        .header("x-forwarded-host", "evil.example")
        .header("x-forwarded-proto", "https")
        .header("forwarded", "host=evil.example;proto=https")
        .body(
            json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "ana"})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let body: Value = response.json().await.unwrap();
    let expected = scim.app.url("/scim/v2/Users/");
    assert!(location.starts_with(&expected), "{location}");
    assert_eq!(body["meta"]["location"], location);
}

/// With `POSTURE_PUBLIC_URL` set, the URLs SCIM names (`Location`, `meta.location`, a
/// member's `$ref`) are the public ones, whatever `Host` a request carries.
#[tokio::test]
async fn the_public_url_not_the_host_names_every_location() {
    let app = TestApp::with_public_url("https://posture.example.com").await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ProvisionScim]).await;
    let post = |path: &'static str, body: Value| {
        let (app, key) = (&app, &key);
        async move {
            app.client
                .post(app.url(path))
                .bearer_auth(key)
                .header("content-type", "application/scim+json")
                .header("host", "evil.example")
                .body(body.to_string())
                .send()
                .await
                .unwrap()
        }
    };
    let user = post(
        "/scim/v2/Users",
        json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "ana"}),
    )
    .await;
    assert_eq!(user.status(), StatusCode::CREATED);
    let location = user.headers()["location"].to_str().unwrap().to_owned();
    let user: Value = user.json().await.unwrap();
    let id = user["id"].as_str().unwrap();
    assert_eq!(
        location,
        format!("https://posture.example.com/scim/v2/Users/{id}")
    );
    assert_eq!(user["meta"]["location"], location);
    let group = post(
        "/scim/v2/Groups",
        json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
               "displayName": "Admins", "members": [{"value": id}]}),
    )
    .await;
    assert_eq!(group.status(), StatusCode::CREATED);
    let group: Value = group.json().await.unwrap();
    assert_eq!(group["members"][0]["$ref"], location);
}
