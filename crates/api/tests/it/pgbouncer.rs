//! `posture-api serve` through PgBouncer in transaction mode (fewer server connections than
//! the pool holds), with its key cache's `LISTEN` connection straight to PostgreSQL
//! (`POSTURE_DATABASE_LISTEN_URL`).

use std::{collections::HashSet, time::Duration};

use posture_domain::{Scope, console::Actor, ports::ApiKeyRepository};
use posture_test_support::{fixtures, pgbouncer::PgBouncer, redis_url};
use reqwest::StatusCode;
use serde_json::Value;

use crate::{rate_limits::ApiProcess, support::TestApp};

#[tokio::test]
async fn the_read_api_runs_through_pgbouncer_and_a_revocation_is_honoured_at_once() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer("A").await;
    let mut records = vec![fixtures::identity("u1", &tenant, "Ada")];
    records.extend(
        (0..120).map(|i| fixtures::finding(&format!("f-{i:03}"), &tenant, "high", "open", "u1")),
    );
    app.ingest(customer, &records).await;
    let (id, key) = app
        .key(customer, &[Scope::ReadFindings, Scope::ReadIdentities])
        .await;
    let bouncer = PgBouncer::start(app.db.server_addr(), 2);
    let through = bouncer.url(&app.db.runtime_url());
    let listen = app.db.runtime_url();
    let api = ApiProcess::spawn_with(
        &app.db,
        &redis_url(),
        10_000,
        &[
            ("DATABASE_URL", through.as_str()),
            ("POSTURE_DATABASE_LISTEN_URL", listen.as_str()),
            ("POSTURE_DB_POOL_SIZE", "8"),
            ("POSTURE_WORKERS", "2"),
        ],
    );
    let http = crate::support::client();
    let get = |path: String| {
        let request = http.get(format!("{}{path}", api.base)).bearer_auth(&key);
        async move { request.send().await.unwrap() }
    };

    // A cursor walk: every finding once, 50 per page.
    let mut seen = HashSet::new();
    let mut path = "/api/v1/findings?limit=50".to_owned();
    loop {
        let response = get(path.clone()).await;
        assert_eq!(response.status(), StatusCode::OK);
        let body: Value = response.json().await.unwrap();
        for finding in body["data"].as_array().unwrap() {
            assert!(seen.insert(finding["id"].as_str().unwrap().to_owned()));
        }
        match body["meta"]["nextCursor"].as_str() {
            Some(cursor) => path = format!("/api/v1/findings?limit=50&after={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen.len(), 120);

    // Concurrent reads on eight pooled connections over two server connections.
    let responses = futures_util::future::join_all(
        (0..24).map(|i| get(format!("/api/v1/findings/f-{:03}", i * 5))),
    )
    .await;
    for response in responses {
        assert_eq!(response.status(), StatusCode::OK);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["data"]["severity"], "high", "{body}");
    }

    // An export holds one transaction for its whole stream.
    let export = get("/api/v1/findings/export?format=ndjson".to_owned()).await;
    assert_eq!(export.status(), StatusCode::OK);
    assert_eq!(export.text().await.unwrap().lines().count(), 120);

    // The key cache hears the revocation on its direct connection.
    app.db
        .store()
        .revoke_key(None, id, &Actor::Operator)
        .await
        .unwrap();
    posture_test_support::waits::wait_for(
        "the revocation reaching the cache",
        Duration::from_secs(1),
        || async {
            let status = get("/api/v1/identities".to_owned()).await.status();
            if status != StatusCode::UNAUTHORIZED {
                assert_eq!(status, StatusCode::OK);
            }
            (status == StatusCode::UNAUTHORIZED).then_some(())
        },
    )
    .await;
}
