//! API keys in PostgreSQL: authentication by hash, scopes, revocation and expiry.

use chrono::{Duration, Utc};
use posture_domain::{
    Error, Scope, ScopeSet, api_key::NewApiKey, clock::Clock as _, console::Actor,
    ports::ApiKeyRepository,
};
use posture_test_support::{TestDb, fixtures::customer};

fn scopes(list: &[Scope]) -> ScopeSet {
    list.iter().copied().collect()
}

#[tokio::test]
async fn an_issued_key_authenticates_as_its_customer_with_its_scopes() {
    let db = TestDb::new().await;
    let store = db.store();
    let scope = customer(&store, "A").await;
    let (key, secret) = NewApiKey::generate(
        scope.customer_id(),
        "ci".into(),
        scopes(&[Scope::ReadFindings]),
        None,
        Utc::now(),
    )
    .unwrap();
    let stored = store.insert_key(key, &Actor::Operator).await.unwrap();
    assert_eq!(stored.prefix, secret.display_prefix());
    let principal = store
        .authenticate(&secret.hash())
        .await
        .unwrap()
        .expect("authenticates");
    assert_eq!(principal.customer_id(), scope.customer_id());
    assert!(principal.has_scope(Scope::ReadFindings));
    assert!(!principal.has_scope(Scope::ReadIdentities));
}

#[tokio::test]
async fn a_revoked_key_fails_authentication_at_once() {
    let db = TestDb::new().await;
    let store = db.store();
    let scope = customer(&store, "A").await;
    let (key, secret) = NewApiKey::generate(
        scope.customer_id(),
        "k".into(),
        ScopeSet::all(),
        None,
        Utc::now(),
    )
    .unwrap();
    let id = store.insert_key(key, &Actor::Operator).await.unwrap().id;
    assert!(store.authenticate(&secret.hash()).await.unwrap().is_some());
    let (revoked, _) = store.revoke_key(None, id, &Actor::Operator).await.unwrap();
    assert!(revoked.revoked_at.is_some());
    assert!(store.authenticate(&secret.hash()).await.unwrap().is_none());
    // Revoking again keeps the first revocation time.
    assert_eq!(
        store
            .revoke_key(None, id, &Actor::Operator)
            .await
            .unwrap()
            .0
            .revoked_at,
        revoked.revoked_at
    );
}

#[tokio::test]
async fn an_expired_key_fails_authentication() {
    let db = TestDb::new().await;
    let (store, clock) = db.store_with_clock();
    let scope = customer(&store, "A").await;
    let now = clock.now();
    let (key, secret) = NewApiKey::generate(
        scope.customer_id(),
        "short".into(),
        ScopeSet::all(),
        Some(now + Duration::days(30)),
        now,
    )
    .unwrap();
    store.insert_key(key, &Actor::Operator).await.unwrap();
    assert!(store.authenticate(&secret.hash()).await.unwrap().is_some());
    clock.advance(std::time::Duration::from_secs(30 * 86_400 - 1));
    assert!(store.authenticate(&secret.hash()).await.unwrap().is_some());
    clock.advance(std::time::Duration::from_secs(1));
    assert!(
        store.authenticate(&secret.hash()).await.unwrap().is_none(),
        "at its expiry"
    );
}

#[tokio::test]
async fn a_key_for_an_unknown_customer_is_refused() {
    let db = TestDb::new().await;
    let store = db.store();
    let (key, _) = NewApiKey::generate(
        posture_domain::CustomerId::generate(),
        "k".into(),
        ScopeSet::all(),
        None,
        Utc::now(),
    )
    .unwrap();
    assert!(matches!(
        store.insert_key(key, &Actor::Operator).await,
        Err(Error::NotFound)
    ));
}

#[tokio::test]
async fn key_scopes_cannot_be_changed_after_issue() {
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    let db = TestDb::new().await;
    let store = db.store();
    let scope = customer(&store, "A").await;
    let (key, _) = NewApiKey::generate(
        scope.customer_id(),
        "k".into(),
        scopes(&[Scope::ReadRoles]),
        None,
        Utc::now(),
    )
    .unwrap();
    let id = store.insert_key(key, &Actor::Operator).await.unwrap().id;
    let mut conn = AsyncPgConnection::establish(db.url()).await.unwrap();
    let result =
        diesel::sql_query("UPDATE api_keys SET scopes = ARRAY['manage:webhooks'] WHERE id = $1")
            .bind::<diesel::sql_types::Uuid, _>(id.as_uuid())
            .execute(&mut conn)
            .await;
    assert!(
        result.is_err(),
        "the database refuses to change a key's scopes"
    );
}

#[tokio::test]
async fn a_customer_holds_at_most_its_cap_of_active_keys() {
    let db = TestDb::new().await;
    let mut config = db.config();
    config.max_active_keys = 2;
    let store = posture_store_postgres::PgStore::new(&config).unwrap();
    let scope = customer(&store, "A").await;
    let other = customer(&store, "B").await;
    let issue = |scope: posture_domain::CustomerScope, expires_at| {
        let (key, _) = NewApiKey::generate(
            scope.customer_id(),
            "k".into(),
            ScopeSet::all(),
            expires_at,
            Utc::now() - Duration::hours(1),
        )
        .unwrap();
        store.insert_key(key, &Actor::Operator)
    };
    // An expired key does not count.
    issue(scope, Some(Utc::now() - Duration::minutes(1)))
        .await
        .unwrap();
    let first = issue(scope, None).await.unwrap();
    issue(scope, None).await.unwrap();
    let refused = issue(scope, None).await.unwrap_err();
    assert!(
        matches!(&refused, Error::Conflict(reason) if reason.contains("2 active keys")),
        "{refused:?}"
    );
    issue(other, None)
        .await
        .expect("another customer has its own cap");
    store
        .revoke_key(None, first.id, &Actor::Operator)
        .await
        .unwrap();
    issue(scope, None)
        .await
        .expect("a revoked key frees its place");
}
