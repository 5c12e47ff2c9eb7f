//! What platform engineers rely on: TLS, outages, graceful shutdown, a missing DATABASE_URL
//! said by name.

use std::{
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use posture_domain::{
    Scope, ScopeSet, api_key::NewApiKey, console::Actor, ports::ApiKeyRepository,
};
use posture_rate_limit::InProcessRateLimiter;
use posture_store_postgres::{PgConfig, PgStore, migrations};
use posture_test_support::{
    fixtures::{self, finding, identity},
    servers::PostgresServer,
    waits::wait_for,
};
use reqwest::StatusCode;
use serde_json::Value;

use crate::support::{TestApp, client};

/// A `posture-api serve` process.
struct ApiProcess {
    child: Option<Child>,
    base: String,
}

impl ApiProcess {
    fn spawn(database_url: &str, extra: &[(&str, &str)]) -> Self {
        Self::spawn_with_stderr(database_url, extra, Stdio::inherit())
    }

    fn spawn_with_stderr(database_url: &str, extra: &[(&str, &str)], stderr: Stdio) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_posture-api"));
        command
            .arg("serve")
            .env("DATABASE_URL", database_url)
            .env("POSTURE_BIND", format!("127.0.0.1:{port}"))
            .env(
                "POSTURE_SECRET_KEY",
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            )
            .env("POSTURE_WORKERS", "1")
            .env("POSTURE_LOG", "warn")
            .stdin(Stdio::null())
            .stderr(stderr);
        for (k, v) in extra {
            command.env(k, v);
        }
        let child = command.spawn().unwrap();
        posture_test_support::waits::wait_for_port("posture-api", port, Duration::from_secs(20));
        Self {
            child: Some(child),
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    fn terminate(&mut self) -> Child {
        let child = self.child.take().unwrap();
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        child
    }
}

impl Drop for ApiProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

async fn issue_key(store: &PgStore, scope: posture_domain::CustomerScope) -> String {
    let scopes: Vec<Scope> = ScopeSet::all().iter().collect();
    let (key, secret) = NewApiKey::generate(
        scope.customer_id(),
        "ops".into(),
        scopes.into_iter().collect(),
        None,
        chrono::Utc::now(),
    )
    .unwrap();
    store.insert_key(key, &Actor::Operator).await.unwrap();
    secret.expose().to_owned()
}

#[tokio::test]
async fn the_api_answers_503_while_postgresql_is_down_and_recovers_without_a_restart() {
    let dir =
        std::env::temp_dir().join(format!("posture-outage-{}", uuid::Uuid::new_v4().simple()));
    let postgres = PostgresServer::start(&dir, "").unwrap();
    let url = postgres.database_url("postgres");
    migrations::run_pending(&url).await.unwrap();
    let store = PgStore::new(&PgConfig::new(url.clone(), posture_domain::clock::system())).unwrap();
    let scope = fixtures::customer(&store, "A").await;
    let key = issue_key(&store, scope).await;
    let api = ApiProcess::spawn(&url, &[]);
    let http = client();
    let tenants = || {
        http.get(format!("{}/api/v1/tenants", api.base))
            .bearer_auth(&key)
            .send()
    };
    let ready = || http.get(format!("{}/readyz", api.base)).send();
    assert_eq!(tenants().await.unwrap().status(), StatusCode::OK);
    assert_eq!(ready().await.unwrap().status(), StatusCode::OK);

    postgres.stop();
    let started = Instant::now();
    let down = tenants().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "answered promptly, no hang"
    );
    assert_eq!(down.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(down.headers().contains_key("retry-after"));
    let body: Value = down.json().await.unwrap();
    assert_eq!(body["error"], "unavailable");
    // /readyz reuses its database check for a second: it turns within that.
    let bound = Duration::from_secs(3).saturating_sub(started.elapsed());
    let readiness = wait_for("/readyz turning unready", bound, || async {
        let readiness = ready().await.unwrap();
        (readiness.status() == StatusCode::SERVICE_UNAVAILABLE).then_some(readiness)
    })
    .await;
    let readiness: Value = readiness.json().await.unwrap();
    assert_eq!(readiness["status"], "not_ready");
    assert_eq!(readiness["checks"]["database"], "unreachable");
    assert_eq!(
        http.get(format!("{}/healthz", api.base))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK,
        "alive all along"
    );

    postgres.restart().unwrap();
    wait_for(
        "the API recovering after PostgreSQL came back",
        Duration::from_secs(15),
        || async {
            let ok = tenants().await.unwrap().status() == StatusCode::OK
                && ready().await.unwrap().status() == StatusCode::OK;
            ok.then_some(())
        },
    )
    .await;
    drop(api);
    drop(postgres);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn sigterm_lets_an_in_flight_request_finish_and_refuses_new_ones() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer("A").await;
    let mut records = vec![identity("u1", &tenant, "Ada")];
    records
        .extend((0..20_000).map(|i| finding(&format!("f-{i:05}"), &tenant, "low", "open", "u1")));
    app.ingest(customer, &records).await;
    let key = issue_key(&app.store, customer).await;
    let mut api = ApiProcess::spawn(&app.db.runtime_url(), &[]);
    let http = client();
    // The export is read slowly on purpose: bounded per read, not in total, so a loaded
    // machine (Citus on 2 cores) is not taken for a stalled server.
    let slow_reader = reqwest::Client::builder()
        .read_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut export = slow_reader
        .get(format!("{}/api/v1/findings/export", api.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let total: usize = export.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let mut body = export.chunk().await.unwrap().unwrap().to_vec();
    let child = api.terminate();
    // The listener closes as the signal is handled: no new connection once it has.
    wait_for(
        "no new connections after SIGTERM",
        Duration::from_secs(5),
        || async {
            http.get(format!("{}/healthz", api.base))
                .send()
                .await
                .is_err()
                .then_some(())
        },
    )
    .await;
    while let Some(chunk) = export.chunk().await.unwrap() {
        body.extend_from_slice(&chunk);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(
        String::from_utf8(body).unwrap().lines().count(),
        total,
        "the in-flight export finished"
    );
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "a graceful stop exits 0");
}

#[tokio::test]
async fn https_serving_works_with_a_self_signed_certificate_and_sends_hsts() {
    use posture_api::server;
    use posture_domain::rate_limit::RatePolicy;

    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let dir = std::env::temp_dir().join(format!("posture-tls-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    let tls = server::tls_config(&dir.join("cert.pem"), &dir.join("key.pem")).unwrap();

    let db = posture_test_support::TestDb::new().await;
    let store = db.store();
    let scope = fixtures::customer(&store, "A").await;
    let key = issue_key(&store, scope).await;
    let limiter: Arc<dyn posture_domain::rate_limit::RateLimiter> = Arc::new(
        InProcessRateLimiter::new(RatePolicy::DEFAULT, posture_domain::clock::system()),
    );
    let state = server::api_state(
        &store,
        limiter,
        server::Wiring {
            trusted_proxies: Default::default(),
            keyring: crate::support::test_keyring(),
            webhook_policy: Default::default(),
            webhook_timeout: Duration::from_secs(2),
            delivery_retention: chrono::Duration::days(30),
            test_limiter: Arc::new(posture_rate_limit::InProcessRateLimiter::new(
                posture_domain::delivery::TEST_RATE,
                posture_domain::clock::system(),
            )),
            customer_test_limiter: Arc::new(InProcessRateLimiter::new(
                posture_domain::delivery::TEST_CUSTOMER_RATE,
                posture_domain::clock::system(),
            )),
            budgets: server::budgets_in_process(posture_domain::clock::system()),
            customer_limiter: None,
            concurrent_exports: 1,
            export_wait: posture_http::DEFAULT_EXPORT_WAIT,
            export_stall: posture_http::DEFAULT_EXPORT_STALL,
            metrics: None,
            hsts: true,
            docs: true,
            replicas: None,
        },
    )
    .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (handle, _) = crate::support::spawn_server(
        listener,
        state,
        server::Serving {
            workers: 1,
            worker_pools: None,
            shutdown_timeout: Duration::from_secs(1),
            tls: Some(tls),
            console: None,
        },
        None,
    );
    let https = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
        .build()
        .unwrap();
    let response = https
        .get(format!("https://localhost:{port}/api/v1/tenants"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["strict-transport-security"],
        "max-age=31536000"
    );
    let plain = client()
        .get(format!("http://localhost:{port}/healthz"))
        .send()
        .await;
    assert!(
        plain.is_err() || plain.unwrap().status() != StatusCode::OK,
        "plain HTTP is not served"
    );
    handle.stop(false).await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_client_protocol_error_is_answered_and_never_logged_as_an_error() {
    use std::io::{Read as _, Write as _};

    let app = TestApp::start().await;
    let log = std::env::temp_dir().join(format!("posture-protocol-{}.log", uuid::Uuid::new_v4()));
    let api = ApiProcess::spawn_with_stderr(
        &app.db.runtime_url(),
        &[("POSTURE_LOG", "info")],
        Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let addr = api.base.trim_start_matches("http://").to_owned();
    let huge_header = format!(
        "GET /healthz HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    for request in [
        "BREW\u{1} /x HTTP/1.1\r\n\r\n".to_owned(),
        "GET / HTTP/9.9\r\nHost: x\r\n\r\n".to_owned(),
        "GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n".to_owned(),
        huge_header,
    ] {
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let _ = stream.write_all(request.as_bytes());
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.starts_with("HTTP/1.1 400") || answer.starts_with("HTTP/1.1 431"),
            "{request:.40}: {answer:.80}"
        );
    }
    // The server still serves, and said nothing at ERROR level about its clients' mistakes.
    let healthy = client()
        .get(format!("{}/healthz", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(healthy.status(), StatusCode::OK);
    drop(api);
    let logged = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert!(!logged.contains("ERROR"), "{logged}");
    assert!(logged.contains("posture-api listening"), "{logged}");
}

#[test]
fn a_command_without_database_url_names_the_variable() {
    for args in [
        &[
            "ingest",
            "--customer",
            "00000000-0000-4000-8000-000000000000",
        ][..],
        &["migrate"],
        &["customers", "list"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_posture-api"))
            .args(args)
            .env_remove("DATABASE_URL")
            .env("POSTURE_LOG", "warn")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?}");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(
            said.contains("DATABASE_URL is not set: export DATABASE_URL=postgres://"),
            "{args:?}: {said}"
        );
    }
}
