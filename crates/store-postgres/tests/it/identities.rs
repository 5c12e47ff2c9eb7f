//! Identities: scoped to their customer, detail with role assignments, stable paging.

use posture_domain::{
    Error, PageRequest,
    identity::{AssignmentType, IdentityFilter},
    ports::IdentityRepository,
};
use posture_test_support::{
    TestDb,
    fixtures::{self, customer, identity, ingest, lines, tenant},
};

#[tokio::test]
async fn identities_are_scoped_to_their_customer() {
    let db = TestDb::new().await;
    let store = db.store();
    let a = customer(&store, "A").await;
    let b = customer(&store, "B").await;
    let (ta, tb) = (fixtures::tenant_id(), fixtures::tenant_id());
    ingest(
        &store,
        a,
        &lines(&[tenant(&ta, "A"), identity("same-id", &ta, "A's")]),
    )
    .await
    .unwrap();
    ingest(
        &store,
        b,
        &lines(&[
            tenant(&tb, "B"),
            identity("same-id", &tb, "B's"),
            identity("b2", &tb, "B2"),
        ]),
    )
    .await
    .unwrap();
    let page = store
        .list_identities(a, &IdentityFilter::default(), PageRequest::default())
        .await
        .unwrap();
    assert_eq!(page.total, 1);
    assert_eq!(page.items[0].display_name, "A's");
    let detail = store
        .get_identity(a, &"same-id".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(detail.identity.display_name, "A's");
    assert!(matches!(
        store.get_identity(a, &"b2".parse().unwrap()).await,
        Err(Error::NotFound)
    ));
}

#[tokio::test]
async fn identity_detail_includes_role_assignments_in_order() {
    let db = TestDb::new().await;
    let store = db.store();
    let a = customer(&store, "A").await;
    let t = fixtures::tenant_id();
    let mut record = identity("u1", &t, "Ada");
    record["roleAssignments"] = serde_json::json!([
        {"roleName": "Global Administrator", "scope": "/", "assignmentType": "eligible"},
        {"roleName": "User Administrator", "scope": "/administrativeUnits/42"},
    ]);
    ingest(&store, a, &lines(&[tenant(&t, "A"), record]))
        .await
        .unwrap();
    let detail = store.get_identity(a, &"u1".parse().unwrap()).await.unwrap();
    let roles: Vec<_> = detail
        .role_assignments
        .iter()
        .map(|r| (r.role_name.as_str(), r.assignment_type))
        .collect();
    assert_eq!(
        roles,
        vec![
            ("Global Administrator", AssignmentType::Eligible),
            ("User Administrator", AssignmentType::Active)
        ]
    );
}

#[tokio::test]
async fn paging_yields_every_identity_once_with_a_constant_total() {
    let db = TestDb::new().await;
    let store = db.store();
    let a = customer(&store, "A").await;
    let (t1, t2) = (fixtures::tenant_id(), fixtures::tenant_id());
    let mut records = vec![tenant(&t1, "One"), tenant(&t2, "Two")];
    for i in 0..57 {
        let t = if i % 3 == 0 { &t2 } else { &t1 };
        records.push(identity(&format!("id-{i:03}"), t, &format!("User {i}")));
    }
    ingest(&store, a, &lines(&records)).await.unwrap();
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let page = store
            .list_identities(
                a,
                &IdentityFilter::default(),
                PageRequest::new(Some(10), Some(offset)).unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(page.total, 57);
        if page.items.is_empty() {
            break;
        }
        offset += page.items.len() as u64;
        seen.extend(page.items.into_iter().map(|i| i.id.into_string()));
    }
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(seen, sorted, "ordered by id, no repeats");
    assert_eq!(seen.len(), 57);

    let filter = IdentityFilter {
        tenant: Some(t2.parse().unwrap()),
        ..IdentityFilter::default()
    };
    let page = store
        .list_identities(a, &filter, PageRequest::default())
        .await
        .unwrap();
    assert_eq!(page.total, 19);
    assert!(
        page.items
            .iter()
            .all(|i| i.cloud_tenant_id.to_string() == t2)
    );
}

/// docs/ingest.md: `roleAssignments` given (even `[]`) replaces the stored ones; absent or
/// null, they are kept (and the identity's `modifiedAt` stays).
#[tokio::test]
async fn role_assignments_left_out_are_kept_and_an_empty_list_clears_them() {
    let db = TestDb::new().await;
    let store = db.store();
    let a = customer(&store, "A").await;
    let t = fixtures::tenant_id();
    let u1 = "u1".parse().unwrap();
    ingest(
        &store,
        a,
        &lines(&[tenant(&t, "A"), identity("u1", &t, "Ada")]),
    )
    .await
    .unwrap();
    let first = store.get_identity(a, &u1).await.unwrap();
    assert_eq!(first.role_assignments.len(), 1);
    let roles = |detail: &posture_domain::identity::IdentityDetail| {
        detail
            .role_assignments
            .iter()
            .map(|r| r.role_name.clone())
            .collect::<Vec<_>>()
    };
    let mut left_out = identity("u1", &t, "Ada");
    left_out.as_object_mut().unwrap().remove("roleAssignments");
    let mut null = identity("u1", &t, "Ada");
    null["roleAssignments"] = serde_json::Value::Null;
    for record in [left_out, null] {
        let said = record.to_string();
        ingest(&store, a, &lines(&[record])).await.unwrap();
        let now = store.get_identity(a, &u1).await.unwrap();
        assert_eq!(roles(&now), roles(&first), "{said}");
        assert_eq!(
            now.identity.modified_at, first.identity.modified_at,
            "{said}"
        );
    }
    let mut cleared = identity("u1", &t, "Ada");
    cleared["roleAssignments"] = serde_json::json!([]);
    ingest(&store, a, &lines(&[cleared])).await.unwrap();
    let now = store.get_identity(a, &u1).await.unwrap();
    assert!(now.role_assignments.is_empty());
    assert!(now.identity.modified_at > first.identity.modified_at);
}
