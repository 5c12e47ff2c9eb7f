//! Authentication and scopes (docs/api.md, "Basics" and "Scopes").

use chrono::Duration;
use posture_domain::{Scope, console::Actor, ports::ApiKeyRepository};
use posture_http::routes::{Access, ENDPOINTS};
use reqwest::StatusCode;

use crate::support::{TestApp, assert_error};

#[tokio::test]
async fn a_missing_key_is_401_with_a_json_body_and_www_authenticate() {
    let app = TestApp::start().await;
    let response = app
        .client
        .get(app.url("/api/v1/identities"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    assert_error(response, StatusCode::UNAUTHORIZED, "unauthorized").await;
}

#[tokio::test]
async fn a_malformed_key_is_401() {
    let app = TestApp::start().await;
    for header in [
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer svc_",
        "Bearer not-a-key",
        "svc_x",
    ] {
        let response = app
            .client
            .get(app.url("/api/v1/identities"))
            .header("Authorization", header)
            .send()
            .await
            .unwrap();
        assert_error(response, StatusCode::UNAUTHORIZED, "unauthorized").await;
    }
}

#[tokio::test]
async fn an_unknown_key_is_401() {
    let app = TestApp::start().await;
    // Well-formed, correct checksum, never issued here.
    let unknown = posture_domain::ApiKeySecret::generate().unwrap();
    let response = app.get("/api/v1/identities", unknown.expose()).await;
    assert_error(response, StatusCode::UNAUTHORIZED, "unauthorized").await;
}

/// A key of a new customer that the app has authenticated and now serves from its cache.
async fn cached_key(app: &TestApp) -> (posture_domain::KeyId, String) {
    app.key_cache_live().await;
    let (customer, _) = app.customer("A").await;
    let (id, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    for _ in 0..2 {
        assert_eq!(
            app.get("/api/v1/identities", &key).await.status(),
            StatusCode::OK
        );
    }
    assert!(app.store.key_cache_stats().hits >= 1, "the key was cached");
    (id, key)
}

#[tokio::test]
async fn a_revoked_key_is_401_on_the_next_request() {
    let app = TestApp::start().await;
    let (id, key) = cached_key(&app).await;
    app.store
        .revoke_key(None, id, &Actor::Operator)
        .await
        .unwrap();
    assert_error(
        app.get("/api/v1/identities", &key).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
}

#[tokio::test]
async fn a_known_key_is_served_from_the_cache_without_a_database_lookup() {
    let app = TestApp::start().await;
    app.key_cache_live().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let before = app.store.key_cache_stats();
    for _ in 0..5 {
        assert_eq!(
            app.get("/api/v1/identities", &key).await.status(),
            StatusCode::OK
        );
    }
    let after = app.store.key_cache_stats();
    assert_eq!(
        after.misses - before.misses,
        1,
        "only the first request misses"
    );
    assert_eq!(after.hits - before.hits, 4);
}

#[tokio::test]
async fn a_key_revoked_by_another_process_is_refused_as_soon_as_postgres_notifies() {
    let app = TestApp::start().await;
    let (id, key) = cached_key(&app).await;
    // Another process (its own pool and cache), like `posture-api keys revoke`.
    app.db
        .store()
        .revoke_key(None, id, &Actor::Operator)
        .await
        .unwrap();
    app.refused_within_a_second(&key, "revocation").await;
}

#[tokio::test]
async fn a_revocation_is_enforced_within_two_seconds_when_the_listen_connection_stalls() {
    use diesel_async::RunQueryDsl as _;

    #[derive(diesel::QueryableByName)]
    struct Port {
        #[diesel(sql_type = diesel::sql_types::Integer)]
        client_port: i32,
    }
    let app = TestApp::behind_freezing_proxy().await;
    let (id, key) = cached_key(&app).await;
    let listen: Port = diesel::sql_query(
        "SELECT client_port FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = $1",
    )
    .bind::<diesel::sql_types::Text, _>(posture_store_postgres::KEY_CACHE_APPLICATION_NAME)
    .get_result(&mut app.db.connection().await)
    .await
    .unwrap();
    // The connection stays open and silent: no error tells the server it is gone.
    let proxy = app.proxy.as_ref().unwrap();
    assert!(proxy.freeze_upstream_port(u16::try_from(listen.client_port).unwrap()));
    app.db
        .store()
        .revoke_key(None, id, &Actor::Operator)
        .await
        .unwrap();
    app.refused_within(&key, "revocation", std::time::Duration::from_secs(2))
        .await;
}

#[tokio::test]
async fn a_key_deleted_in_sql_by_an_operator_is_refused() {
    use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _};

    let app = TestApp::start().await;
    let (id, key) = cached_key(&app).await;
    let mut conn = AsyncPgConnection::establish(app.db.url()).await.unwrap();
    diesel::sql_query(format!("DELETE FROM api_keys WHERE id = '{id}'"))
        .execute(&mut conn)
        .await
        .unwrap();
    app.refused_within_a_second(&key, "deletion").await;
}

#[tokio::test]
async fn an_expired_key_is_401_even_when_cached() {
    let app = TestApp::with_clock().await;
    app.key_cache_live().await;
    let (customer, _) = app.customer("A").await;
    let expires = app.now() + Duration::hours(1);
    let (_, key) = app
        .key_expiring(customer, &[Scope::ReadIdentities], Some(expires))
        .await;
    for _ in 0..2 {
        assert_eq!(
            app.get("/api/v1/identities", &key).await.status(),
            StatusCode::OK
        );
    }
    assert!(app.store.key_cache_stats().hits >= 1, "the key was cached");
    app.clock().advance(std::time::Duration::from_secs(3599));
    assert_eq!(
        app.get("/api/v1/identities", &key).await.status(),
        StatusCode::OK,
        "a second before its expiry"
    );
    app.clock().advance(std::time::Duration::from_secs(2));
    assert_error(
        app.get("/api/v1/identities", &key).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
}

#[tokio::test]
async fn a_key_without_the_route_scope_is_403_naming_the_scope() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadFindings]).await;
    let response = app.get("/api/v1/identities", &key).await;
    assert_eq!(
        response.headers()["www-authenticate"],
        "Bearer error=\"insufficient_scope\", scope=\"read:identities\""
    );
    let reason = assert_error(response, StatusCode::FORBIDDEN, "insufficient_scope").await;
    assert!(reason.contains("read:identities"), "{reason}");
}

#[tokio::test]
async fn the_tenants_route_is_gated_by_read_identities() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, roles) = app.key(customer, &[Scope::ReadRoles]).await;
    let reason = assert_error(
        app.get("/api/v1/tenants", &roles).await,
        StatusCode::FORBIDDEN,
        "insufficient_scope",
    )
    .await;
    assert!(reason.contains("read:identities"));
    let (_, identities) = app.key(customer, &[Scope::ReadIdentities]).await;
    assert_eq!(
        app.get("/api/v1/tenants", &identities).await.status(),
        StatusCode::OK
    );
}

/// Every scoped route of the table, with an `{id}` filled in.
fn scoped_routes() -> Vec<(reqwest::Method, String, Scope)> {
    ENDPOINTS
        .iter()
        .filter_map(|e| e.access.scopes().first().map(|s| (e, *s)))
        .map(|(e, s)| {
            let method = reqwest::Method::from_bytes(e.method.as_str().as_bytes()).unwrap();
            (method, e.full_path().replace("{id}", "some-id"), s)
        })
        .collect()
}

#[tokio::test]
async fn provision_scim_alone_opens_no_route() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ProvisionScim]).await;
    let routes = scoped_routes();
    assert!(!routes.is_empty());
    for (method, path, scope) in routes {
        assert_scope_refused(&app, &key, method, &path, scope).await;
    }
}

/// `method path` with `key` is refused: 403 `insufficient_scope`, naming `scope`.
async fn assert_scope_refused(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
    scope: Scope,
) {
    let response = app
        .client
        .request(method.clone(), app.url(path))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let reason = assert_error(response, StatusCode::FORBIDDEN, "insufficient_scope").await;
    assert!(reason.contains(scope.as_str()), "{method} {path}: {reason}");
}

/// `path` with the last letter of its collection percent-encoded
/// (`/api/v1/webhooks/x` → `/api/v1/webhook%73/x`): the same route to the router, which
/// matches the path decoded.
fn encoded(path: &str) -> String {
    let rest = path.strip_prefix("/api/v1/").unwrap();
    let end = rest.find('/').unwrap_or(rest.len());
    let letter = rest[..end]
        .bytes()
        .rposition(|b| b.is_ascii_lowercase())
        .unwrap();
    let byte = rest.as_bytes()[letter];
    format!(
        "/api/v1/{}%{byte:02X}{}",
        &rest[..letter],
        &rest[letter + 1..]
    )
}

#[tokio::test]
async fn a_percent_encoded_path_is_checked_as_the_route_it_reaches() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ProvisionScim]).await;
    assert_eq!(
        encoded("/api/v1/webhooks/x/test"),
        "/api/v1/webhook%73/x/test"
    );
    for (method, path, scope) in scoped_routes() {
        assert_scope_refused(&app, &key, method, &encoded(&path), scope).await;
    }
    // With the scope, the encoded path is the route, its query parsed for it.
    let (_, reader) = app.key(customer, &[Scope::ReadFindings]).await;
    let body = app
        .get_json("/api/v1/finding%73?limit=1", &reader, StatusCode::OK)
        .await;
    assert_eq!(body["meta"]["limit"], 1, "{body}");
    // The prefix encoded is the API too: gated, counted.
    let response = app
        .client
        .get(app.url("/ap%69/v1/findings"))
        .send()
        .await
        .unwrap();
    assert!(response.headers().contains_key("x-ratelimit-limit"));
    assert_error(response, StatusCode::UNAUTHORIZED, "unauthorized").await;
    // An empty id is no route: the router's 404, not a route's 403.
    assert_error(
        app.get("/api/v1/findings/", &key).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn every_route_but_the_contract_is_401_without_a_key() {
    let app = TestApp::start().await;
    let routes: Vec<(reqwest::Method, String)> = ENDPOINTS
        .iter()
        .filter(|e| e.access != Access::Public)
        .map(|e| {
            let method = reqwest::Method::from_bytes(e.method.as_str().as_bytes()).unwrap();
            (method, e.full_path().replace("{id}", "some-id"))
        })
        .collect();
    assert!(
        routes
            .iter()
            .any(|(_, path)| path == "/api/v1/keys/current")
    );
    for (method, path) in routes {
        let response = app
            .client
            .request(method, app.url(&path))
            .send()
            .await
            .unwrap();
        assert_error(response, StatusCode::UNAUTHORIZED, "unauthorized").await;
    }
}

#[tokio::test]
async fn using_a_key_records_its_last_use() {
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (id, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    app.get("/api/v1/identities", &key).await;
    // The write happens off the request path.
    posture_test_support::waits::wait_for(
        "last_used_at set",
        std::time::Duration::from_secs(5),
        || async {
            let keys = app.store.list_keys(customer).await.unwrap();
            keys.iter().find(|k| k.id == id).unwrap().last_used_at
        },
    )
    .await;
}
