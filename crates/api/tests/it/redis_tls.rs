//! Redis over TLS (`rediss://`) as an ACL user limited to posture's keys and commands: the
//! rules of deploy/compose.yaml and secret.example.yaml, against a real `redis-server`.

use std::process::{Child, Command, Stdio};

use posture_domain::Scope;
use posture_test_support::waits::wait_for;
use reqwest::StatusCode;

use crate::{rate_limits::ApiProcess, support::TestApp};

/// The ACL rules posture's Redis user needs (as in deploy/compose.yaml).
const ACL_RULES: &[&str] = &[
    "on",
    ">posture-test-password",
    "~posture:*",
    "-@all",
    "+@connection",
    "+evalsha",
    "+eval",
    "+script|load",
    "+time",
    "+incr",
    "+expireat",
    "+get",
];

struct TlsRedis {
    child: Child,
    port: u16,
    ca: std::path::PathBuf,
}

impl TlsRedis {
    fn start() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "posture-redistls-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        std::fs::write(dir.join("redis.crt"), cert.cert.pem()).unwrap();
        std::fs::write(dir.join("redis.key"), cert.signing_key.serialize_pem()).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let file = |name: &str| dir.join(name).display().to_string();
        let child = Command::new("redis-server")
            .args([
                "--port",
                "0",
                "--tls-port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .args([
                "--tls-cert-file",
                &file("redis.crt"),
                "--tls-key-file",
                &file("redis.key"),
            ])
            .args([
                "--tls-ca-cert-file",
                &file("redis.crt"),
                "--tls-auth-clients",
                "no",
            ])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--user",
                "default",
                "off",
                "--user",
                "posture",
            ])
            .args(ACL_RULES)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        posture_test_support::waits::wait_for_port(
            "redis-server",
            port,
            std::time::Duration::from_secs(10),
        );
        Self {
            child,
            port,
            ca: dir.join("redis.crt"),
        }
    }

    fn url(&self) -> String {
        format!(
            "rediss://posture:posture-test-password@localhost:{}",
            self.port
        )
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn two_api_processes_share_their_counts_through_redis_over_tls_as_a_limited_acl_user() {
    let redis = TlsRedis::start();
    let app = TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app.key(customer, &[Scope::ReadIdentities]).await;
    let (_, warm_key) = app.key(customer, &[Scope::ReadIdentities]).await;
    // The test CA is trusted through SSL_CERT_FILE, as an operator would for a private CA.
    let ca = redis.ca.display().to_string();
    let env = [("SSL_CERT_FILE", ca.as_str())];
    let first = ApiProcess::spawn_with(&app.db, &redis.url(), 4, &env);
    let second = ApiProcess::spawn_with(&app.db, &redis.url(), 4, &env);
    let http = crate::support::client();
    // On a loaded machine a first answer over TLS (handshake, AUTH, script) can take longer
    // than the limiter waits: that instance then counts in process for a second, as designed.
    // The counting below starts once each instance has had Redis answer on a key other than
    // the one counted. (The warm key's requests count towards the customer's own limit too,
    // ten times the key's by default: at most 12 of its 40.)
    for instance in [&first, &second] {
        until_redis_answers(&http, &instance.base, &warm_key).await;
    }
    let mut statuses = Vec::new();
    // Three requests on each: 6 > 4 only when they count together (each process alone, on
    // its in-process fallback, would allow all six).
    for i in 0..6 {
        let base = if i % 2 == 0 {
            &first.base
        } else {
            &second.base
        };
        let response = http
            .get(format!("{base}/api/v1/tenants"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        statuses.push(response.status());
    }
    let refused = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!(
        refused, 2,
        "4 allowed across both over rediss://: {statuses:?}"
    );
}

/// Sends requests with `warm_key` to the instance at `base` until its `/readyz` reports the
/// limiter as shared after one of them (a request that timed out on Redis reports `degraded`
/// until a later one gets an answer: Redis is tried again at most once a second).
async fn until_redis_answers(http: &reqwest::Client, base: &str, warm_key: &str) {
    let what = format!("Redis over TLS to answer {base}");
    wait_for(&what, std::time::Duration::from_secs(30), || async {
        let warm = http
            .get(format!("{base}/api/v1/tenants"))
            .bearer_auth(warm_key)
            .send()
            .await
            .unwrap();
        assert!(
            [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS].contains(&warm.status()),
            "{}",
            warm.status()
        );
        let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
        let ready: serde_json::Value = ready.json().await.unwrap();
        let mode = &ready["checks"]["rateLimiter"]["mode"];
        assert!(mode == "shared" || mode == "degraded", "{ready}");
        (mode == "shared").then_some(())
    })
    .await;
}
