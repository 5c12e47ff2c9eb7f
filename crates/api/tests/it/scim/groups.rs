//! `/Groups`: members added and removed as Entra ID and Okta do it.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Scim, assert_scim_error, json_of};

fn ids(group: &Value) -> Vec<String> {
    let mut ids: Vec<String> = group["members"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| m["value"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

fn patch(operations: Value) -> Option<Value> {
    Some(json!({
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": operations,
    }))
}

#[tokio::test]
async fn a_groups_members_are_added_removed_and_replaced() {
    let scim = Scim::start().await;
    let ada = scim.create_user("ada").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let grace = scim.create_user("grace").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let created = scim
        .call(
            Method::POST,
            "/Groups",
            Some(json!({"displayName": "Admins", "members": [{"value": ada}]})),
            StatusCode::CREATED,
        )
        .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let path = format!("/Groups/{id}");
    assert_eq!(ids(&created), vec![ada.clone()]);
    assert_eq!(created["members"][0]["type"], "User");
    assert!(
        created["members"][0]["$ref"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/Users/{ada}"))
    );

    // Entra ID: add with a list, remove with a path filter, rename without a path. The
    // group is answered when asked for (`attributes`), else 204.
    let added = scim
        .call(
            Method::PATCH,
            &format!("{path}?attributes=displayName,members"),
            patch(json!([
                {"op": "Add", "path": "members", "value": [{"value": grace}]},
            ])),
            StatusCode::OK,
        )
        .await;
    let mut both = vec![ada.clone(), grace.clone()];
    both.sort();
    assert_eq!(ids(&added), both);
    let response = scim
        .send(
            Method::PATCH,
            &path,
            patch(json!([
                {"op": "Remove", "path": format!("members[value eq \"{ada}\"]")},
                {"op": "Replace", "value": {"id": id, "displayName": "Posture admins"}},
            ])),
        )
        .await;
    assert_eq!(response.headers()["etag"], "W/\"3\"");
    assert_eq!(
        json_of(response, StatusCode::NO_CONTENT, "PATCH").await,
        Value::Null
    );
    let removed = scim.call(Method::GET, &path, None, StatusCode::OK).await;
    assert_eq!(ids(&removed), vec![grace.clone()]);
    assert_eq!(removed["displayName"], "Posture admins");
    assert_eq!(removed["meta"]["version"], "W/\"3\"");

    // Okta: PUT the whole group.
    let put = scim
        .call(
            Method::PUT,
            &path,
            Some(json!({"displayName": "Posture admins", "members": [{"value": ada}]})),
            StatusCode::OK,
        )
        .await;
    assert_eq!(ids(&put), vec![ada.clone()]);

    // A large group is read without its members.
    let slim = scim
        .call(
            Method::GET,
            &format!("{path}?excludedAttributes=members"),
            None,
            StatusCode::OK,
        )
        .await;
    assert!(slim.get("members").is_none(), "{slim}");
    assert_eq!(slim["displayName"], "Posture admins");

    // Entra ID's membership check.
    let check = |user: &str| {
        format!(
            "/Groups?filter=id%20eq%20%22{id}%22%20and%20members%20eq%20%22{user}%22&excludedAttributes=members"
        )
    };
    assert_eq!(
        scim.call(Method::GET, &check(&ada), None, StatusCode::OK)
            .await["totalResults"],
        1
    );
    assert_eq!(
        scim.call(Method::GET, &check(&grace), None, StatusCode::OK)
            .await["totalResults"],
        0
    );
    let by_name = scim
        .call(
            Method::GET,
            "/Groups?filter=displayName%20eq%20%22posture%20ADMINS%22",
            None,
            StatusCode::OK,
        )
        .await;
    assert_eq!(by_name["Resources"][0]["id"], id.as_str());

    // A deleted user leaves its groups, whose version moves.
    scim.call(
        Method::DELETE,
        &format!("/Users/{ada}"),
        None,
        StatusCode::NO_CONTENT,
    )
    .await;
    let after = scim.call(Method::GET, &path, None, StatusCode::OK).await;
    assert_eq!(ids(&after), Vec::<String>::new());
    assert_ne!(after["meta"]["version"], put["meta"]["version"]);

    scim.call(
        Method::PATCH,
        &path,
        patch(json!([{"op": "remove", "path": "members"}])),
        StatusCode::NO_CONTENT,
    )
    .await;
    let all = scim.call(Method::GET, &path, None, StatusCode::OK).await;
    assert_eq!(all["members"], json!([]));
    scim.call(Method::DELETE, &path, None, StatusCode::NO_CONTENT)
        .await;
    assert_scim_error(
        scim.send(Method::GET, &path, None).await,
        StatusCode::NOT_FOUND,
        None,
    )
    .await;
    // The user's deletion did not take the other user with it.
    scim.call(
        Method::GET,
        &format!("/Users/{grace}"),
        None,
        StatusCode::OK,
    )
    .await;
}

#[tokio::test]
async fn a_member_must_be_one_of_the_customers_users() {
    let scim = Scim::start().await;
    let other = scim.other_key().await;
    let theirs = scim
        .send_as(
            &other,
            Method::POST,
            "/Users",
            Some(json!({"userName": "eve"})),
        )
        .await;
    let eve = json_of(theirs, StatusCode::CREATED, "their user").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let refused = scim
        .send(
            Method::POST,
            "/Groups",
            Some(json!({"displayName": "G", "members": [{"value": eve}]})),
        )
        .await;
    assert_scim_error(refused, StatusCode::BAD_REQUEST, Some("invalidValue")).await;
    // Nothing of the refused creation was kept.
    let groups = scim
        .call(Method::GET, "/Groups", None, StatusCode::OK)
        .await;
    assert_eq!(groups["totalResults"], 0);
    let group = scim
        .call(
            Method::POST,
            "/Groups",
            Some(json!({"displayName": "G"})),
            StatusCode::CREATED,
        )
        .await;
    let path = format!("/Groups/{}", group["id"].as_str().unwrap());
    let refused = scim
        .send(
            Method::PATCH,
            &path,
            patch(json!([
                {"op": "replace", "path": "displayName", "value": "Renamed"},
                {"op": "add", "path": "members", "value": [{"value": eve}]},
            ])),
        )
        .await;
    assert_scim_error(refused, StatusCode::BAD_REQUEST, Some("invalidValue")).await;
    let unchanged = scim.call(Method::GET, &path, None, StatusCode::OK).await;
    assert_eq!(
        unchanged["displayName"], "G",
        "the refused PATCH changed nothing"
    );
    assert_eq!(unchanged["meta"]["version"], "W/\"1\"");
    // The other customer sees none of it.
    let seen = scim.send_as(&other, Method::GET, &path, None).await;
    assert_scim_error(seen, StatusCode::NOT_FOUND, None).await;
    let taken = scim
        .send(Method::POST, "/Groups", Some(json!({"displayName": "g"})))
        .await;
    assert_scim_error(taken, StatusCode::CONFLICT, Some("uniqueness")).await;
}

#[tokio::test]
async fn a_search_pages_users_then_groups() {
    let scim = Scim::start().await;
    for name in ["a", "b"] {
        scim.create_user(name).await;
    }
    scim.call(
        Method::POST,
        "/Groups",
        Some(json!({"displayName": "G", "externalId": "x"})),
        StatusCode::CREATED,
    )
    .await;
    let search = |body: Value| scim.call(Method::POST, "/.search", Some(body), StatusCode::OK);
    let all = search(json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "attributes": ["externalId"]})).await;
    assert_eq!(all["totalResults"], 3);
    let kinds: Vec<&str> = all["Resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["schemas"][0].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "urn:ietf:params:scim:schemas:core:2.0:User",
            "urn:ietf:params:scim:schemas:core:2.0:User",
            "urn:ietf:params:scim:schemas:core:2.0:Group",
        ]
    );
    assert_eq!(
        all["Resources"][2],
        json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
            "id": all["Resources"][2]["id"],
            "externalId": "x",
        })
    );
    let second = search(json!({"startIndex": 2, "count": 2})).await;
    assert_eq!(second["Resources"].as_array().unwrap().len(), 2);
    assert_eq!(second["Resources"][1]["displayName"], "G");
    let groups_only = search(json!({"filter": "members eq \"nobody\""})).await;
    assert_eq!(groups_only["totalResults"], 0);
    let users = scim
        .call(
            Method::POST,
            "/Users/.search",
            Some(json!({"filter": "userName eq \"B\""})),
            StatusCode::OK,
        )
        .await;
    assert_eq!(users["Resources"][0]["userName"], "b");
}

#[tokio::test]
async fn every_change_is_a_line_of_the_customers_audit_log_by_the_key() {
    let scim = Scim::start().await;
    let ada = scim.create_user("ada@example.com").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    scim.call(
        Method::PATCH,
        &format!("/Users/{ada}"),
        patch(json!([{"op": "Replace", "path": "active", "value": "False"}])),
        StatusCode::OK,
    )
    .await;
    let group = scim
        .call(
            Method::POST,
            "/Groups",
            Some(json!({"displayName": "Admins", "members": [{"value": ada}]})),
            StatusCode::CREATED,
        )
        .await;
    let path = format!("/Groups/{}", group["id"].as_str().unwrap());
    scim.call(
        Method::PATCH,
        &path,
        patch(json!([
            {"op": "remove", "path": format!("members[value eq \"{ada}\"]")},
            {"op": "replace", "path": "displayName", "value": "Owners"},
        ])),
        StatusCode::NO_CONTENT,
    )
    .await;
    // A PUT that keeps one member and adds one counts what changed.
    let grace = scim.create_user("grace@example.com").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    scim.call(
        Method::PUT,
        &path,
        Some(json!({"displayName": "Owners", "members": [{"value": ada}]})),
        StatusCode::OK,
    )
    .await;
    scim.call(
        Method::PUT,
        &path,
        Some(json!({"displayName": "Owners", "members": [{"value": ada}, {"value": grace}]})),
        StatusCode::OK,
    )
    .await;
    scim.call(Method::DELETE, &path, None, StatusCode::NO_CONTENT)
        .await;
    scim.call(
        Method::DELETE,
        &format!("/Users/{ada}"),
        None,
        StatusCode::NO_CONTENT,
    )
    .await;
    // A refused change is no line.
    let taken = scim.send(Method::POST, "/Groups", Some(json!({"displayName": "G", "members": [{"value": "0196a0f4-8b8e-7c61-8f5e-000000000001"}]}))).await;
    assert_scim_error(taken, StatusCode::BAD_REQUEST, Some("invalidValue")).await;

    let log = posture_domain::ports::ConsoleRepository::audit_log(
        &scim.app.store,
        scim.customer,
        None,
        20,
    )
    .await
    .unwrap();
    // The key's first use from the test's address is a line too (its own, off the request
    // path): left out. The oldest line is the operator's issuance of the key.
    let log: Vec<_> = log
        .into_iter()
        .filter(|e| e.action != "key.used_from_new_address")
        .collect();
    let (issued, log) = log.split_last().unwrap();
    assert_eq!(issued.action, "key.issued");
    let lines: Vec<(&str, &str)> = log
        .iter()
        .map(|e| (e.action.as_str(), e.detail.as_deref().unwrap_or_default()))
        .collect();
    assert_eq!(
        lines,
        [
            ("scim.user.deleted", "userName \"ada@example.com\""),
            ("scim.group.deleted", "displayName \"Owners\""),
            (
                "scim.group.updated",
                "displayName \"Owners\", members added 1 (\"grace@example.com\"), removed 0"
            ),
            (
                "scim.group.updated",
                "displayName \"Owners\", members added 1 (\"ada@example.com\"), removed 0"
            ),
            (
                "scim.user.created",
                "userName \"grace@example.com\", active true"
            ),
            (
                "scim.group.updated",
                "displayName \"Owners\", members added 0, removed 1 (\"ada@example.com\"), renamed from \"Admins\""
            ),
            (
                "scim.group.created",
                "displayName \"Admins\", members added 1 (\"ada@example.com\"), removed 0"
            ),
            (
                "scim.user.updated",
                "userName \"ada@example.com\", active false"
            ),
            (
                "scim.user.created",
                "userName \"ada@example.com\", active true"
            ),
        ]
    );
    let key = scim.app.store_key_id(&scim.key).await;
    for line in log {
        assert_eq!(line.actor_kind, "key");
        assert_eq!(line.actor_subject, key.to_string());
        assert_eq!(line.key.as_ref().unwrap().id, key);
    }
}
