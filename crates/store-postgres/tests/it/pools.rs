//! The pools of an instance's HTTP workers (`PgStore::for_worker`): each worker's own
//! connections, counted by the instance, with the instance's caches shared.

use chrono::Utc;
use posture_domain::{ScopeSet, api_key::NewApiKey, console::Actor, ports::ApiKeyRepository};
use posture_test_support::{TestDb, fixtures::customer};

#[tokio::test]
async fn a_worker_store_has_a_pool_of_its_own_which_the_instance_counts() {
    let db = TestDb::new().await;
    let store = db.store();
    let worker = store.for_worker(3).unwrap();
    assert_eq!(store.status().size, 0, "connections are opened on demand");
    worker.ping().await.unwrap();
    let own = worker.status();
    assert_eq!((own.max_size, own.size), (3, 1));
    let instance = store.status();
    assert_eq!(instance.max_size, 8 + 3);
    assert_eq!(
        instance.size, 1,
        "the worker's connection, none of the instance's"
    );
    store.for_worker(0).unwrap().ping().await.unwrap();
    assert_eq!(
        store.status().max_size,
        8 + 3 + 1,
        "a worker gets at least one connection"
    );
}

#[tokio::test]
async fn worker_stores_share_the_instance_key_cache_and_see_a_revocation_at_once() {
    let db = TestDb::new().await;
    let store = db.store();
    store.start_key_cache();
    let (a, b) = (store.for_worker(2).unwrap(), store.for_worker(2).unwrap());
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
    let hash = secret.hash();
    assert!(a.authenticate(&hash).await.unwrap().is_some());
    let misses = store.key_cache_stats().misses;
    assert!(misses >= 1, "worker a's lookup went to the database");
    // The cache is served once its LISTEN connection has answered a check.
    let shared = &store;
    posture_test_support::waits::wait_for(
        "the key cache going live",
        std::time::Duration::from_secs(10),
        || async move { shared.key_cache_stats().live.then_some(()) },
    )
    .await;
    assert!(a.authenticate(&hash).await.unwrap().is_some());
    assert!(b.authenticate(&hash).await.unwrap().is_some());
    assert_eq!(
        b.key_cache_stats(),
        store.key_cache_stats(),
        "one cache, seen alike from every store"
    );
    b.revoke_key(None, id, &Actor::Operator).await.unwrap();
    assert!(a.authenticate(&hash).await.unwrap().is_none());
    assert!(store.authenticate(&hash).await.unwrap().is_none());
}
