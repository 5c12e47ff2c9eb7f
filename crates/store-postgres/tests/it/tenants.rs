//! Tenants: a cloud tenant connects to one customer, and a foreign one is not found.

use posture_domain::{Error, PageRequest, ports::TenantRepository, tenant::NewTenant};
use posture_test_support::{TestDb, fixtures};

fn new_tenant(id: &str) -> NewTenant {
    NewTenant {
        cloud_tenant_id: id.parse().unwrap(),
        display_name: "Contoso".into(),
        primary_domain: None,
    }
}

#[tokio::test]
async fn a_tenant_connects_to_one_customer_only() {
    let db = TestDb::new().await;
    let store = db.store();
    let a = fixtures::customer(&store, "A").await;
    let b = fixtures::customer(&store, "B").await;
    let id = fixtures::tenant_id();
    store.connect_tenant(a, new_tenant(&id)).await.unwrap();
    let err = store.connect_tenant(b, new_tenant(&id)).await.unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err:?}");
    // Reconnecting to the same customer updates its names.
    let mut renamed = new_tenant(&id);
    renamed.display_name = "Contoso Ltd".into();
    assert_eq!(
        store.connect_tenant(a, renamed).await.unwrap().display_name,
        "Contoso Ltd"
    );
}

#[tokio::test]
async fn a_foreign_tenant_is_not_found() {
    let db = TestDb::new().await;
    let store = db.store();
    let a = fixtures::customer(&store, "A").await;
    let b = fixtures::customer(&store, "B").await;
    let id = fixtures::tenant_id();
    store.connect_tenant(a, new_tenant(&id)).await.unwrap();
    assert!(matches!(
        store.find_tenant(b, id.parse().unwrap()).await,
        Err(Error::NotFound)
    ));
    let b_tenants = store.list_tenants(b, PageRequest::default()).await.unwrap();
    assert_eq!(b_tenants.total, 0);
    assert!(b_tenants.items.is_empty());
}
