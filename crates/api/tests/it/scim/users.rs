//! `/Users` as Microsoft Entra ID and Okta use it.

use posture_domain::Scope;
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::{Scim, assert_scim_error, json_of};

#[tokio::test]
async fn a_user_is_created_read_replaced_patched_and_deleted() {
    let scim = Scim::start().await;
    let response = scim
        .send(
            Method::POST,
            "/Users",
            Some(json!({
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
                "userName": "ada@example.com",
                "externalId": "e-1",
                "name": {"givenName": "Ada", "familyName": "Lovelace"},
                "emails": [{"value": "ada@example.com", "type": "work", "primary": true}],
                "active": true,
            })),
        )
        .await;
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let etag = response.headers()["etag"].to_str().unwrap().to_owned();
    let created = json_of(response, StatusCode::CREATED, "POST /Users").await;
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(location, created["meta"]["location"]);
    assert!(
        location.ends_with(&format!("/scim/v2/Users/{id}")),
        "{location}"
    );
    assert_eq!(etag, "W/\"1\"");
    assert_eq!(created["meta"]["version"], etag);
    assert_eq!(created["meta"]["resourceType"], "User");
    assert_eq!(created["name"]["givenName"], "Ada");
    assert_eq!(created["emails"][0]["type"], "work");
    assert_eq!(created["externalId"], "e-1");

    let read = scim
        .call(Method::GET, &format!("/Users/{id}"), None, StatusCode::OK)
        .await;
    assert_eq!(read, created);

    // Okta updates with PUT: the whole user, what is left out is unassigned.
    let replaced = scim
        .call(
            Method::PUT,
            &format!("/Users/{id}"),
            Some(json!({"userName": "ada@example.com", "displayName": "Ada L.", "active": true})),
            StatusCode::OK,
        )
        .await;
    assert_eq!(replaced["displayName"], "Ada L.");
    assert!(replaced.get("emails").is_none(), "{replaced}");
    assert_eq!(replaced["meta"]["version"], "W/\"2\"");
    assert_eq!(replaced["meta"]["created"], created["meta"]["created"]);

    // Entra ID deactivates: "Replace" capitalised, the boolean a string.
    let deactivated = scim
        .call(
            Method::PATCH,
            &format!("/Users/{id}"),
            Some(json!({
                "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                "Operations": [{"op": "Replace", "path": "active", "value": "False"}],
            })),
            StatusCode::OK,
        )
        .await;
    assert_eq!(deactivated["active"], false);
    // ... and changes attributes without a path.
    let patched = scim
        .call(
            Method::PATCH,
            &format!("/Users/{id}"),
            Some(json!({
                "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                "Operations": [
                    {"op": "Replace", "value": {"active": "True", "name.givenName": "Ada"}},
                    {"op": "Add", "path": "emails[type eq \"work\"].value", "value": "ada@new.example"},
                ],
            })),
            StatusCode::OK,
        )
        .await;
    assert_eq!(patched["active"], true);
    assert_eq!(patched["name"]["givenName"], "Ada");
    assert_eq!(
        patched["emails"],
        json!([{"value": "ada@new.example", "type": "work"}])
    );
    assert_eq!(
        patched["displayName"], "Ada L.",
        "untouched attributes stay"
    );

    // The core schema's attributes under its URN deactivate too; a path below `active` is
    // refused (400 invalidPath), never answered 200 with nothing changed.
    let deactivated = scim
        .call(
            Method::PATCH,
            &format!("/Users/{id}"),
            Some(json!({
                "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                "Operations": [{"op": "replace", "value":
                    {"urn:ietf:params:scim:schemas:core:2.0:User": {"active": false}}}],
            })),
            StatusCode::OK,
        )
        .await;
    assert_eq!(deactivated["active"], false);
    let refused = scim
        .send(
            Method::PATCH,
            &format!("/Users/{id}"),
            Some(json!({
                "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                "Operations": [{"op": "replace", "path": "active.value", "value": true}],
            })),
        )
        .await;
    assert_scim_error(refused, StatusCode::BAD_REQUEST, Some("invalidPath")).await;

    scim.call(
        Method::DELETE,
        &format!("/Users/{id}"),
        None,
        StatusCode::NO_CONTENT,
    )
    .await;
    let gone = scim.send(Method::GET, &format!("/Users/{id}"), None).await;
    assert_scim_error(gone, StatusCode::NOT_FOUND, None).await;
}

#[tokio::test]
async fn okta_finds_a_user_by_name_before_creating_it() {
    let scim = Scim::start().await;
    let path = "/Users?filter=userName%20eq%20%22Ada%40Example.com%22&startIndex=1&count=100";
    let none = scim.call(Method::GET, path, None, StatusCode::OK).await;
    assert_eq!(
        none["schemas"],
        json!(["urn:ietf:params:scim:api:messages:2.0:ListResponse"])
    );
    assert_eq!(none["totalResults"], 0);
    assert_eq!(none["Resources"], json!([]));
    let created = scim.create_user("ada@example.com").await;
    scim.create_user("grace@example.com").await;
    // userName is unique case-insensitively, and so compared.
    let found = scim.call(Method::GET, path, None, StatusCode::OK).await;
    assert_eq!(found["totalResults"], 1);
    assert_eq!(found["Resources"][0]["id"], created["id"]);
    let taken = scim
        .send(
            Method::POST,
            "/Users",
            Some(json!({"userName": "ADA@example.com"})),
        )
        .await;
    let error = assert_scim_error(taken, StatusCode::CONFLICT, Some("uniqueness")).await;
    assert!(
        error["detail"].as_str().unwrap().contains("taken"),
        "{error}"
    );
}

#[tokio::test]
async fn lists_filter_by_id_external_id_and_active_and_page_from_one() {
    let scim = Scim::start().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let user = scim
            .call(
                Method::POST,
                "/Users",
                Some(json!({"userName": format!("u{i}"), "externalId": format!("x{i}"), "active": i % 2 == 0})),
                StatusCode::CREATED,
            )
            .await;
        ids.push(user["id"].as_str().unwrap().to_owned());
    }
    let page = scim
        .call(
            Method::GET,
            "/Users?startIndex=2&count=2",
            None,
            StatusCode::OK,
        )
        .await;
    assert_eq!(page["totalResults"], 5);
    assert_eq!(page["startIndex"], 2);
    assert_eq!(page["itemsPerPage"], 2);
    assert_eq!(
        page["Resources"][0]["id"],
        ids[1].as_str(),
        "in creation order"
    );
    assert_eq!(page["Resources"][1]["id"], ids[2].as_str());
    let by_external = scim
        .call(
            Method::GET,
            "/Users?filter=externalId%20eq%20%22x3%22",
            None,
            StatusCode::OK,
        )
        .await;
    assert_eq!(by_external["Resources"][0]["id"], ids[3].as_str());
    let by_id = format!("/Users?filter=id%20eq%20%22{}%22", ids[4]);
    assert_eq!(
        scim.call(Method::GET, &by_id, None, StatusCode::OK).await["totalResults"],
        1
    );
    let inactive = scim
        .call(
            Method::GET,
            "/Users?filter=active%20eq%20false",
            None,
            StatusCode::OK,
        )
        .await;
    assert_eq!(inactive["totalResults"], 2);
    let counted = scim
        .call(Method::GET, "/Users?count=0", None, StatusCode::OK)
        .await;
    assert_eq!(
        (
            counted["totalResults"].clone(),
            counted["Resources"].clone()
        ),
        (json!(5), json!([]))
    );
}

#[tokio::test]
async fn versions_guard_writes_and_reads() {
    let scim = Scim::start().await;
    let id = scim.create_user("ada").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/Users/{id}");
    let body = json!({"userName": "ada", "displayName": "Ada"});
    let put = |tag: &'static str| {
        scim.app
            .client
            .put(scim.app.url(&format!("/scim/v2{path}")))
            .bearer_auth(&scim.key)
            .header("if-match", tag)
            .header("content-type", "application/scim+json")
            .body(body.to_string())
            .send()
    };
    let stale = put("W/\"7\"").await.unwrap();
    assert_scim_error(stale, StatusCode::PRECONDITION_FAILED, None).await;
    let fresh = put("W/\"1\"").await.unwrap();
    assert_eq!(fresh.headers()["etag"], "W/\"2\"");
    let cached = scim
        .app
        .client
        .get(scim.app.url(&format!("/scim/v2{path}")))
        .bearer_auth(&scim.key)
        .header("if-none-match", "W/\"2\"")
        .send()
        .await
        .unwrap();
    assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(cached.headers()["etag"], "W/\"2\"");
    // Every tag of a list counts, not only the first.
    let listed = put("W/\"7\", W/\"2\"").await.unwrap();
    assert_eq!(listed.status(), StatusCode::OK);
    assert_eq!(listed.headers()["etag"], "W/\"3\"");
    let patch = |tag: &'static str| {
        scim.app
            .client
            .patch(scim.app.url(&format!("/scim/v2{path}")))
            .bearer_auth(&scim.key)
            .header("if-match", tag)
            .header("content-type", "application/scim+json")
            .body(
                json!({"Operations": [{"op": "replace", "path": "displayName", "value": "A"}]})
                    .to_string(),
            )
            .send()
    };
    let stale = patch("W/\"1\", W/\"2\"").await.unwrap();
    assert_scim_error(stale, StatusCode::PRECONDITION_FAILED, None).await;
    let listed = patch("W/\"1\", \"3\"").await.unwrap();
    assert_eq!(listed.status(), StatusCode::OK);
    assert_eq!(listed.headers()["etag"], "W/\"4\"");
    let delete = scim
        .app
        .client
        .delete(scim.app.url(&format!("/scim/v2{path}")))
        .bearer_auth(&scim.key)
        .header("if-match", "W/\"1\"")
        .send()
        .await
        .unwrap();
    assert_scim_error(delete, StatusCode::PRECONDITION_FAILED, None).await;
    scim.call(Method::GET, &path, None, StatusCode::OK).await;
}

#[tokio::test]
async fn one_customer_never_sees_or_touches_another_customers_users() {
    let scim = Scim::start().await;
    let id = scim.create_user("ada").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let other = scim.other_key().await;
    let path = format!("/Users/{id}");
    let patch = json!({"Operations": [{"op": "replace", "path": "active", "value": false}]});
    for (method, body) in [
        (Method::GET, None),
        (Method::PUT, Some(json!({"userName": "ada"}))),
        (Method::PATCH, Some(patch)),
        (Method::DELETE, None),
    ] {
        let response = scim.send_as(&other, method.clone(), &path, body).await;
        assert_scim_error(response, StatusCode::NOT_FOUND, None).await;
    }
    let listed = scim.send_as(&other, Method::GET, "/Users", None).await;
    assert_eq!(
        json_of(listed, StatusCode::OK, "list").await["totalResults"],
        0
    );
    // The same userName is free for the other customer.
    let theirs = scim
        .send_as(
            &other,
            Method::POST,
            "/Users",
            Some(json!({"userName": "ada"})),
        )
        .await;
    json_of(theirs, StatusCode::CREATED, "the other's user").await;
    let ours = scim.call(Method::GET, &path, None, StatusCode::OK).await;
    assert_eq!(ours["active"], true, "untouched");
}

#[tokio::test]
async fn only_a_key_holding_provision_scim_is_let_in() {
    let scim = Scim::start().await;
    let every_other: Vec<Scope> = Scope::ALL
        .iter()
        .copied()
        .filter(|s| *s != Scope::ProvisionScim)
        .collect();
    let (_, reader) = scim.app.key(scim.customer, &every_other).await;
    let refused = scim.send_as(&reader, Method::GET, "/Users", None).await;
    assert!(
        refused.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("provision:scim")
    );
    let body = assert_scim_error(refused, StatusCode::FORBIDDEN, None).await;
    assert_eq!(body["detail"], "requires scope provision:scim");
    let anonymous = scim
        .app
        .client
        .get(scim.app.url("/scim/v2/Users"))
        .send()
        .await
        .unwrap();
    assert!(anonymous.headers().contains_key("x-ratelimit-limit"));
    assert_scim_error(anonymous, StatusCode::UNAUTHORIZED, None).await;
    let discovery = scim
        .call(Method::GET, "/ServiceProviderConfig", None, StatusCode::OK)
        .await;
    assert_eq!(discovery["patch"]["supported"], true);
    assert_eq!(discovery["bulk"]["supported"], false);
}
