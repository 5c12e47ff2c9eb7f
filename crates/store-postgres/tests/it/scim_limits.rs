//! A customer's provisioned users and groups stay within their limits, also when an
//! identity provider creates them concurrently (creates of one customer take turns), and a
//! group's preview reads only the members it shows.

use posture_domain::{
    Error,
    ports::ScimRepository as _,
    scim::{GroupAttributes, MAX_GROUPS, MAX_USERS, UserAttributes},
};
use posture_test_support::TestDb;

use crate::triage::setup;

/// Creates at once: more than the room left.
const AT_ONCE: usize = 12;
/// Room left under each limit when they start.
const ROOM: u64 = 4;

#[tokio::test]
async fn concurrent_creates_cannot_pass_the_users_or_groups_limit_together() {
    let db = TestDb::new().await;
    let store = db.store();
    let (scope, key, _) = setup(&store, "A").await;
    let customer = scope.customer_id().as_uuid();
    db.execute(&format!(
        "INSERT INTO scim_users (customer_id, id, user_name, user_name_key, attributes, \
             version, created_at, updated_at) \
         SELECT '{customer}', gen_random_uuid(), 'u' || g, 'u' || g, '{{}}', 1, now(), now() \
         FROM generate_series(1, {}) g",
        MAX_USERS - ROOM
    ))
    .await;
    db.execute(&format!(
        "INSERT INTO scim_groups (customer_id, id, display_name, display_name_key, version, \
             created_at, updated_at) \
         SELECT '{customer}', gen_random_uuid(), 'g' || g, 'g' || g, 1, now(), now() \
         FROM generate_series(1, {}) g",
        MAX_GROUPS - ROOM
    ))
    .await;

    let users = futures_util::future::join_all((0..AT_ONCE).map(|i| {
        let store = store.clone();
        async move {
            store
                .create_scim_user(scope, key, &UserAttributes::named(format!("new{i}")))
                .await
        }
    }))
    .await;
    let groups = futures_util::future::join_all((0..AT_ONCE).map(|i| {
        let store = store.clone();
        async move {
            let group = GroupAttributes {
                display_name: format!("new{i}"),
                external_id: None,
                members: Vec::new(),
            };
            store.create_scim_group(scope, key, &group).await.map(drop)
        }
    }))
    .await;
    for (what, outcomes) in [
        (
            "users",
            users.into_iter().map(|r| r.map(drop)).collect::<Vec<_>>(),
        ),
        ("groups", groups),
    ] {
        let created = outcomes.iter().filter(|r| r.is_ok()).count() as u64;
        assert_eq!(
            created, ROOM,
            "{what}: as many created as there was room for"
        );
        assert!(
            outcomes
                .iter()
                .filter_map(|r| r.as_ref().err())
                .all(|e| matches!(e, Error::Invalid { field, .. } if field == what)),
            "{what}: the others are refused for the limit"
        );
    }
}

#[tokio::test]
async fn a_group_preview_reads_its_first_members_and_counts_the_rest() {
    let db = TestDb::new().await;
    let store = db.store();
    let (scope, key, _) = setup(&store, "A").await;
    let (other, _, _) = setup(&store, "B").await;
    let mut members = Vec::new();
    for i in 0..5 {
        let user = store
            .create_scim_user(scope, key, &UserAttributes::named(format!("u{i}")))
            .await
            .unwrap();
        members.push(user.id);
    }
    let group = GroupAttributes {
        display_name: "Staff".to_owned(),
        external_id: None,
        members,
    };
    let id = store
        .create_scim_group(scope, key, &group)
        .await
        .unwrap()
        .id;
    let whole = store.scim_group(scope, id, true).await.unwrap().unwrap();
    let whole = whole.members.unwrap();
    let (preview, total) = store
        .scim_group_preview(scope, id, 2)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(total, 5);
    assert_eq!(
        preview.members.unwrap(),
        whole[..2],
        "the first two, in the full read's order"
    );
    assert!(
        store
            .scim_group_preview(other, id, 2)
            .await
            .unwrap()
            .is_none(),
        "another customer's group is not found"
    );
}
