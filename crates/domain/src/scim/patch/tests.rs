//! PATCH as identity providers send it, applied to users and groups.

use serde_json::{Value, json};

use super::*;

fn request(operations: Value) -> PatchRequest {
    serde_json::from_value(json!({
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": operations,
    }))
    .unwrap()
}

fn ada() -> UserAttributes {
    let mut user = UserAttributes::named("ada@example.com");
    user.extras.emails = vec![Email {
        value: "ada@example.com".into(),
        kind: Some("work".into()),
        primary: Some(true),
    }];
    user
}

fn patched(operations: Value) -> Result<UserAttributes> {
    let mut user = ada();
    apply_user_patch(&mut user, &request(operations))?;
    Ok(user)
}

#[test]
fn entra_deactivates_with_a_capitalised_op_and_a_string_boolean() {
    let user = patched(json!([{"op": "Replace", "path": "active", "value": "False"}])).unwrap();
    assert_eq!(user.active, Some(false));
    assert!(!user.is_active());
    let user = patched(json!([{"op": "replace", "value": {"active": false}}])).unwrap();
    assert!(!user.is_active());
}

#[test]
fn a_patch_without_a_path_sets_the_attributes_of_its_value() {
    let user = patched(json!([{
        "op": "Replace",
        "value": {
            "displayName": "Ada L.",
            "name.givenName": "Ada",
            "urn:ietf:params:scim:schemas:core:2.0:User:name.familyName": "Lovelace",
            "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department": "R&D",
        }
    }]))
    .unwrap();
    assert_eq!(user.display_name.as_deref(), Some("Ada L."));
    let name = user.extras.name.unwrap();
    assert_eq!(name.given_name.as_deref(), Some("Ada"));
    assert_eq!(name.family_name.as_deref(), Some("Lovelace"));
}

#[test]
fn a_patch_without_a_path_may_choose_an_address_by_its_type() {
    let user = patched(json!([{
        "op": "Replace",
        "value": {"emails[type eq \"work\"].value": "ada@new.example", "name.givenName": "Ada"},
    }]))
    .unwrap();
    assert_eq!(user.extras.emails[0].value, "ada@new.example");
    assert_eq!(user.extras.emails[0].primary, Some(true));
    assert!(patched(json!([{"op": "replace", "path": "emails.value", "value": "x"}])).is_err());
}

#[test]
fn an_address_is_chosen_by_its_type() {
    let user = patched(json!([
        {"op": "replace", "path": "emails[type eq \"work\"].value", "value": "ada@new.example"},
        {"op": "add", "path": "emails[type eq \"home\"].value", "value": "ada@home.example"},
    ]))
    .unwrap();
    let emails = &user.extras.emails;
    assert_eq!(emails.len(), 2);
    assert_eq!(emails[0].value, "ada@new.example");
    assert_eq!(
        emails[0].primary,
        Some(true),
        "the rest of the entry is kept"
    );
    assert_eq!(emails[1].kind.as_deref(), Some("home"));
    let user = patched(json!([{"op": "remove", "path": "emails[type eq \"work\"]"}])).unwrap();
    assert!(user.extras.emails.is_empty());
}

#[test]
fn removing_unassigns_but_not_what_is_required() {
    let mut user = ada();
    user.display_name = Some("Ada".into());
    apply_user_patch(
        &mut user,
        &request(json!([{"op": "remove", "path": "displayName"}])),
    )
    .unwrap();
    assert_eq!(user.display_name, None);
    // Unassigned, `active` deactivates nobody: only false does.
    apply_user_patch(
        &mut user,
        &request(json!([{"op": "remove", "path": "active"}])),
    )
    .unwrap();
    assert_eq!(user.active, None);
    assert!(user.is_active());
    for operations in [
        json!([{"op": "remove", "path": "userName"}]),
        json!([{"op": "remove"}]),
        json!([{"op": "replace", "path": "userName", "value": ""}]),
    ] {
        assert!(patched(operations.clone()).is_err(), "{operations}");
    }
}

#[test]
fn malformed_operations_are_refused() {
    for operations in [
        json!([]),
        json!([{"op": "move", "path": "active", "value": true}]),
        json!([{"op": "replace", "path": "active"}]),
        json!([{"op": "replace", "value": "x"}]),
        json!([{"op": "replace", "path": "emails[type ne \"work\"].value", "value": "x"}]),
        json!([{"op": "replace", "path": "emails[type eq work].value", "value": "x"}]),
        json!([{"op": "replace", "path": "emails[type eq \"work\"", "value": "x"}]),
        json!([{"op": "replace", "path": "active", "value": "perhaps"}]),
    ] {
        assert!(patched(operations.clone()).is_err(), "{operations}");
    }
    let many: Vec<_> = (0..=MAX_OPERATIONS)
        .map(|_| json!({"op": "replace", "path": "active", "value": true}))
        .collect();
    assert!(patched(Value::Array(many)).is_err());
}

#[test]
fn attributes_posture_does_not_keep_are_dropped() {
    let user = patched(json!([
        {"op": "add", "path": "title", "value": "Countess"},
        {"op": "replace", "path": "addresses[type eq \"work\"].locality", "value": "London"},
    ]))
    .unwrap();
    assert_eq!(user, ada());
}

#[test]
fn a_group_patch_names_its_member_changes_in_order() {
    let (a, b) = (ScimUserId::generate(), ScimUserId::generate());
    let patch = GroupPatch::from_request(&request(json!([
        {"op": "Add", "path": "members", "value": [{"value": a.to_string()}, {"value": b.to_string()}]},
        {"op": "Remove", "path": format!("members[value eq \"{a}\"]")},
        {"op": "Remove", "path": "members", "value": [{"value": b.to_string()}]},
        {"op": "Replace", "value": {"id": "ignored", "displayName": "Admins"}},
        {"op": "remove", "path": "externalId"},
    ])))
    .unwrap();
    assert_eq!(
        patch,
        GroupPatch {
            display_name: Some("Admins".into()),
            external_id: Some(None),
            members: vec![
                MemberChange::Add(vec![a, b]),
                MemberChange::Remove(vec![a]),
                MemberChange::Remove(vec![b]),
            ],
        }
    );
    let all =
        GroupPatch::from_request(&request(json!([{"op": "remove", "path": "members"}]))).unwrap();
    assert_eq!(all.members, vec![MemberChange::RemoveAll]);
}

#[test]
fn a_group_patch_refuses_what_it_cannot_do() {
    let id = ScimUserId::generate();
    for operations in [
        json!([{"op": "remove", "path": "displayName"}]),
        json!([{"op": "replace", "path": "displayName", "value": "a\u{0000}b"}]),
        json!([{"op": "replace", "value": {"displayName": "x".repeat(257)}}]),
        json!([{"op": "add", "path": "externalId", "value": "line\nbreak"}]),
        json!([{"op": "add", "path": "members", "value": [{"value": "not-a-uuid"}]}]),
        json!([{"op": "remove", "path": "members[display eq \"Ada\"]"}]),
        json!([{"op": "replace", "path": "members.value", "value": id.to_string()}]),
    ] {
        assert!(
            GroupPatch::from_request(&request(operations.clone())).is_err(),
            "{operations}"
        );
    }
    let many: Vec<_> = (0..=super::super::MAX_MEMBERS_PER_REQUEST / 2)
        .map(|_| json!({"value": id.to_string()}))
        .collect();
    let twice = json!([
        {"op": "add", "path": "members", "value": many},
        {"op": "add", "path": "members", "value": many},
    ]);
    assert!(GroupPatch::from_request(&request(twice)).is_err());
}

#[test]
fn every_form_of_a_deactivation_deactivates() {
    for operations in [
        json!([{"op": "replace", "value": {"urn:ietf:params:scim:schemas:core:2.0:User": {"active": false}}}]),
        json!([{"op": "Replace", "value": {"URN:IETF:PARAMS:SCIM:SCHEMAS:CORE:2.0:USER": {"active": "False"}}}]),
        json!([{"op": "replace", "path": "urn:ietf:params:scim:schemas:core:2.0:User", "value": {"active": false}}]),
        json!([{"op": "replace", "path": "urn:ietf:params:scim:schemas:core:2.0:User:active", "value": false}]),
        json!([{"op": "replace", "value": {"urn:ietf:params:scim:schemas:core:2.0:User:active": false}}]),
    ] {
        let user = patched(operations.clone()).unwrap();
        assert_eq!(user.active, Some(false), "{operations}");
    }
}

#[test]
fn a_path_below_a_single_value_is_refused_never_dropped() {
    for operations in [
        json!([{"op": "replace", "path": "active.value", "value": false}]),
        json!([{"op": "replace", "value": {"active.value": false}}]),
        json!([{"op": "replace", "path": "userName.value", "value": "eve@example.com"}]),
        json!([{"op": "replace", "path": "active[value eq true]", "value": false}]),
        json!([{"op": "replace", "value": {"urn:ietf:params:scim:schemas:core:2.0:User": false}}]),
        json!([{"op": "replace", "value": {"urn:ietf:params:scim:schemas:core:2.0:User":
            {"urn:ietf:params:scim:schemas:core:2.0:User": {"active": false}}}}]),
    ] {
        let error = patched(operations.clone()).unwrap_err();
        assert!(
            matches!(&error, Error::Invalid { field, .. } if field == "path" || field == "value"),
            "{operations}: {error:?}"
        );
    }
}

#[test]
fn a_groups_members_under_the_core_schema_are_changed() {
    let id = "0193f2a0-7c1e-7000-8000-0000000000a1";
    let patch = GroupPatch::from_request(&request(json!([{
        "op": "replace",
        "value": {"urn:ietf:params:scim:schemas:core:2.0:Group": {"members": []}}
    }])))
    .unwrap();
    assert_eq!(patch.members, [MemberChange::Replace(Vec::new())]);
    let patch = GroupPatch::from_request(&request(json!([{
        "op": "add",
        "path": "urn:ietf:params:scim:schemas:core:2.0:Group",
        "value": {"members": [{"value": id}]}
    }])))
    .unwrap();
    assert_eq!(
        patch.members,
        [MemberChange::Add(vec![id.parse().unwrap()])]
    );
}

#[test]
fn an_add_of_emails_without_a_path_adds_to_the_list() {
    let user = patched(json!([{"op": "add", "value": {
        "emails": [{"value": "ada@home.example", "type": "home"}]
    }}]))
    .unwrap();
    let values: Vec<&str> = user
        .extras
        .emails
        .iter()
        .map(|e| e.value.as_str())
        .collect();
    assert_eq!(values, ["ada@example.com", "ada@home.example"]);
    // A replace without a path replaces it, as with the path `emails`.
    let user = patched(json!([{"op": "replace", "value": {
        "emails": [{"value": "ada@home.example", "type": "home"}]
    }}]))
    .unwrap();
    let values: Vec<&str> = user
        .extras
        .emails
        .iter()
        .map(|e| e.value.as_str())
        .collect();
    assert_eq!(values, ["ada@home.example"]);
}

#[test]
fn a_path_naming_no_attribute_is_refused_never_dropped() {
    // The core URN with its colon is the schema itself: its value's attributes apply.
    let user = patched(json!([{"op": "replace",
        "path": "urn:ietf:params:scim:schemas:core:2.0:User:", "value": {"active": false}}]))
    .unwrap();
    assert_eq!(user.active, Some(false));
    let user = patched(json!([{"op": "replace",
        "value": {"urn:ietf:params:scim:schemas:core:2.0:User:": {"active": false}}}]))
    .unwrap();
    assert_eq!(user.active, Some(false));
    // A misspelt core URN names nothing: refused, not dropped.
    for operations in [
        json!([{"op": "replace", "path": "urn:ietf:params:scim:schemas:core:2.0:Users:active",
                "value": false}]),
        json!([{"op": "replace",
                "value": {"urn:ietf:params:scim:schemas:core:2.0:Users:active": false}}]),
    ] {
        let error = patched(operations.clone()).unwrap_err();
        assert!(
            matches!(&error, Error::Invalid { field, .. } if field == "path"),
            "{operations}: {error:?}"
        );
    }
    // A group's member selected by a key, not a path: refused.
    let refused = GroupPatch::from_request(&request(json!([{"op": "replace",
        "value": {"members[value eq \"0193f2a0-7c1e-7000-8000-0000000000a1\"]": []}}])));
    assert!(
        matches!(&refused, Err(Error::Invalid { field, .. }) if field == "path"),
        "{refused:?}"
    );
}

#[test]
fn a_name_kept_before_the_visibility_rule_can_still_be_deactivated_not_written_again() {
    let mut legacy = UserAttributes::named("kate@contoso.example\u{200b}");
    apply_user_patch(
        &mut legacy,
        &request(json!([{"op": "replace", "path": "active", "value": false}])),
    )
    .unwrap();
    assert_eq!(legacy.active, Some(false));
    let mut user = ada();
    let renamed = apply_user_patch(
        &mut user,
        &request(
            json!([{"op": "replace", "path": "userName", "value": "ada\u{200b}@example.com"}]),
        ),
    );
    assert!(
        matches!(&renamed, Err(Error::Invalid { field, .. }) if field == "userName"),
        "{renamed:?}"
    );
}
