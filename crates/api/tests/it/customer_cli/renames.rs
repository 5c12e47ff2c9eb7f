//! A copy kept by `posture sync` follows what the rows embed: a pass that renames an
//! identity modifies the findings and role recommendations that show it.

use posture_cli::{
    mirror::{Mirror, Resource},
    progress::Quiet,
    sync::{SyncOptions, sync},
};
use posture_test_support::fixtures::{finding, identity, recommendation};
use reqwest::StatusCode;

use super::{TempDb, cli, sync::assert_mirror_is_the_server};
use crate::support::TestApp;

#[tokio::test]
async fn a_renamed_identity_reaches_the_findings_of_a_synced_copy() {
    let app = TestApp::start().await;
    let (customer, t) = app.customer("A").await;
    let key = app.key_with_every_scope(customer).await;
    let pass = |name: &str| {
        vec![
            identity("u1", &t, name),
            identity("u2", &t, "Bo"),
            finding("f1", &t, "high", "open", "u1"),
            finding("f2", &t, "low", "open", "u2"),
            recommendation("r1", &t, "u1"),
        ]
    };
    app.ingest(customer, &pass("Ada")).await;
    let db = TempDb::new("rename");
    let (api, _) = cli(&app, &key);
    sync(&api, db.0.clone(), &Quiet, &SyncOptions::default())
        .await
        .unwrap();

    // A pass renames u1 and changes nothing else. `ingest` returns once the server serves
    // the pass (its bound is reported from a cache that follows the pass's notification).
    let bound = || async {
        let page = app
            .get_json("/api/v1/findings?limit=1", &key, StatusCode::OK)
            .await;
        page["meta"]["syncedThrough"].clone()
    };
    let before = bound().await;
    app.ingest(customer, &pass("Ada Lovelace")).await;
    assert_ne!(bound().await, before, "the new pass's bound is served");
    let report = sync(&api, db.0.clone(), &Quiet, &SyncOptions::default())
        .await
        .unwrap();
    let changed = |list: &str| {
        report
            .lists
            .iter()
            .find(|l| l.list == list)
            .map(|l| (l.new, l.changed))
    };
    assert_eq!(
        changed("findings"),
        Some((0, 1)),
        "f1 embeds u1; f2 is as it was"
    );
    assert_eq!(changed("identities"), Some((0, 1)));
    assert_eq!(changed("roles"), Some((0, 1)), "r1 embeds u1 too");
    assert_mirror_is_the_server(&app, &key, &db).await;
    let mirror = Mirror::open(&db.0).unwrap();
    let f1 = mirror
        .rows(Resource::Findings)
        .unwrap()
        .into_iter()
        .find(|r| r["id"] == "f1")
        .unwrap();
    assert_eq!(f1["identity"]["displayName"], "Ada Lovelace");
}
