//! The migrations apply to an empty database, once.

use posture_store_postgres::migrations;
use posture_test_support::TestDb;

#[tokio::test]
async fn migrations_apply_to_an_empty_database_and_then_none_is_pending() {
    let db = TestDb::empty().await;
    assert!(!migrations::pending(db.url()).await.unwrap().is_empty());
    let applied = migrations::run_pending(db.url()).await.unwrap();
    assert!(!applied.is_empty());
    assert!(migrations::pending(db.url()).await.unwrap().is_empty());
    assert!(
        migrations::run_pending(db.url()).await.unwrap().is_empty(),
        "a second run applies nothing"
    );
}
