//! The operator commands, run as the real binary (docs/operations.md).

use std::process::{Command, Output};

use posture_test_support::{TestDb, fixtures};
use reqwest::StatusCode;
use serde_json::Value;

pub(crate) fn posture_api(db: &TestDb, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write as _;
    let mut command = Command::new(env!("CARGO_BIN_EXE_posture-api"));
    command
        .args(args)
        .env("DATABASE_URL", db.runtime_url())
        .env("POSTURE_LOG", "warn");
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

pub(crate) fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one JSON object: {stdout}");
    serde_json::from_str(&stdout).unwrap()
}

#[tokio::test]
async fn operator_commands_set_up_a_customer_whose_key_reads_its_data() {
    let app = crate::support::TestApp::start().await;
    let db = &app.db;
    let customer = json_of(&posture_api(
        db,
        &["customers", "create", "--name", "Contoso", "--json"],
        None,
    ));
    let id = customer["id"].as_str().unwrap();
    let tenant = fixtures::tenant_id();
    let added = json_of(&posture_api(
        db,
        &[
            "tenants",
            "add",
            "--customer",
            id,
            "--tenant-id",
            &tenant,
            "--name",
            "Contoso",
            "--json",
        ],
        None,
    ));
    assert_eq!(added["cloudTenantId"], tenant.as_str());
    let file = fixtures::lines(&[
        fixtures::identity("u1", &tenant, "Ada"),
        fixtures::finding("f1", &tenant, "high", "open", "u1"),
    ]);
    let pass = json_of(&posture_api(
        db,
        &["ingest", "--customer", id, "-", "--json"],
        Some(&file),
    ));
    assert_eq!(
        (
            pass["identities"].as_u64(),
            pass["findings"].as_u64(),
            pass["newFindings"].as_u64()
        ),
        (Some(1), Some(1), Some(1))
    );
    let issued = json_of(&posture_api(
        db,
        &[
            "keys",
            "issue",
            "--customer",
            id,
            "--scope",
            "read:identities",
            "--scope",
            "read:findings",
            "--name",
            "siem",
            "--expires-in",
            "30d",
            "--json",
        ],
        None,
    ));
    let key = issued["key"].as_str().unwrap();
    assert!(key.starts_with("svc_"));
    assert_eq!(
        issued["scopes"],
        serde_json::json!(["read:identities", "read:findings"])
    );
    assert!(issued["expiresAt"].is_string());

    let body = app
        .get_json("/api/v1/identities", key, StatusCode::OK)
        .await;
    assert_eq!(body["data"][0]["id"], "u1");

    let listed = json_of(&posture_api(
        db,
        &["keys", "list", "--customer", id, "--json"],
        None,
    ));
    let listed_text = listed.to_string();
    assert!(!listed_text.contains(key), "keys list never shows the key");
    assert_eq!(listed["data"][0]["prefix"], &key[..10]);

    let key_id = issued["id"].as_str().unwrap();
    json_of(&posture_api(
        db,
        &["keys", "revoke", key_id, "--json"],
        None,
    ));
    app.refused_within_a_second(key, "revocation by `keys revoke`")
        .await;
}

#[tokio::test]
async fn a_bad_ingest_line_is_reported_with_its_number_and_exits_non_zero() {
    let db = TestDb::new().await;
    let store = db.store();
    let scope = fixtures::customer(&store, "A").await;
    let id = scope.customer_id().to_string();
    let tenant = fixtures::tenant_id();
    let file = format!(
        "{}{}{{\"type\":\"finding\",\"id\":\"f1\"}}\n",
        fixtures::lines(&[fixtures::tenant(&tenant, "A")]),
        fixtures::lines(&[fixtures::identity("u1", &tenant, "Ada")]),
    );
    let output = posture_api(&db, &["ingest", "--customer", &id, "-"], Some(&file));
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("line 3"), "{stderr}");
    assert!(stderr.contains("nothing was changed"), "{stderr}");
    assert!(
        db.row_counts()
            .await
            .iter()
            .filter(|(t, _)| *t != "customers")
            .all(|(_, n)| *n == 0)
    );
}

#[tokio::test]
async fn issuing_a_key_with_an_unknown_scope_fails_naming_it() {
    let db = TestDb::new().await;
    let store = db.store();
    let scope = fixtures::customer(&store, "A").await;
    let output = posture_api(
        &db,
        &[
            "keys",
            "issue",
            "--customer",
            &scope.customer_id().to_string(),
            "--scope",
            "read:everything",
        ],
        None,
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("read:everything") && stderr.contains("read:findings"),
        "{stderr}"
    );
}

#[tokio::test]
async fn failed_deliveries_are_listed_by_status_and_can_be_retried() {
    use std::{sync::Arc, time::Duration};

    use posture_delivery::{Worker, WorkerConfig};
    use posture_domain::delivery::RetryPolicy;
    use wiremock::{Mock, MockServer, ResponseTemplate, matchers::method};

    let app = crate::support::TestApp::start().await;
    let (customer, tenant) = app.customer("A").await;
    let (_, key) = app
        .key(customer, &[posture_domain::Scope::ManageWebhooks])
        .await;
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&receiver)
        .await;
    let created = app
        .client
        .post(app.url("/api/v1/webhooks"))
        .bearer_auth(&key)
        .json(
            &serde_json::json!({"name": "r", "webhookUrl": format!("{}/hook", receiver.uri()),
                                   "webhookType": "generic", "eventTypes": ["finding_high"]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let created: Value = created.json().await.unwrap();
    let webhook = created["data"]["id"].as_str().unwrap().to_owned();
    app.ingest(
        customer,
        &[
            fixtures::identity("u1", &tenant, "Ada"),
            fixtures::finding("h1", &tenant, "high", "open", "u1"),
        ],
    )
    .await;
    let store = Arc::new(app.store.clone());
    let worker = Arc::new(
        Worker::new(
            store.clone(),
            store,
            Arc::new(crate::support::test_keyring()),
            WorkerConfig {
                id: "cli-test".into(),
                concurrency: 1,
                slow_concurrency: 1,
                share: posture_domain::fair_share::FairShare::default(),
                lease: Duration::from_secs(5),
                poll_interval: Duration::from_secs(1),
                retry: RetryPolicy {
                    base: Duration::from_millis(100),
                    max_attempts: 1,
                },
                timeout: Duration::from_secs(1),
                allow_private: true,
                retention: chrono::Duration::days(30),
                disable_after: chrono::Duration::days(5),
                clock: posture_domain::clock::system(),
            },
        )
        .unwrap(),
    );
    assert_eq!(worker.drain().await.unwrap(), 1);

    let id = customer.customer_id().to_string();
    let failed = json_of(&posture_api(
        &app.db,
        &[
            "deliveries",
            "list",
            "--customer",
            &id,
            "--status",
            "failed",
            "--json",
        ],
        None,
    ));
    let rows = failed["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["eventType"], "finding_high");
    assert_eq!(rows[0]["attempts"], 1);
    assert_eq!(rows[0]["lastError"], "HTTP 500");
    assert_eq!(
        rows[0]["nextAttemptAt"],
        Value::Null,
        "failed: no next attempt"
    );
    let delivery = rows[0]["id"].as_str().unwrap();
    // For people: aligned columns, and no next attempt for a delivery that has none.
    let text = String::from_utf8(
        posture_api(&app.db, &["deliveries", "list", "--customer", &id], None).stdout,
    )
    .unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let column = |line: &str, cell: &str| line.find(cell).unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        column(lines[0], "STATUS"),
        column(lines[1], "failed"),
        "{text}"
    );
    assert_eq!(
        column(lines[0], "LAST ERROR"),
        column(lines[1], "HTTP 500"),
        "{text}"
    );
    assert!(
        lines[1].contains("  -  "),
        "a failed delivery has no next attempt: {text}"
    );
    let of_subscription = |subscription: &str| {
        json_of(&posture_api(
            &app.db,
            &[
                "deliveries",
                "list",
                "--customer",
                &id,
                "--subscription",
                subscription,
                "--json",
            ],
            None,
        ))["data"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(of_subscription(&webhook), 1);
    assert_eq!(of_subscription("00000000-0000-4000-8000-000000000000"), 0);
    let shown = json_of(&posture_api(
        &app.db,
        &["deliveries", "show", delivery, "--customer", &id, "--json"],
        None,
    ));
    assert_eq!(shown["id"], delivery);
    assert_eq!(shown["trigger"], "event");
    let log = shown["attemptLog"].as_array().unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["statusCode"], 500);
    assert_eq!(log[0]["error"], "HTTP 500");
    let foreign = posture_api(
        &app.db,
        &[
            "deliveries",
            "show",
            delivery,
            "--customer",
            "00000000-0000-4000-8000-000000000000",
        ],
        None,
    );
    assert!(!foreign.status.success(), "another customer's delivery");
    let retried = json_of(&posture_api(
        &app.db,
        &["deliveries", "retry", delivery, "--json"],
        None,
    ));
    assert_eq!(retried["status"], "pending");
    assert_eq!(retried["trigger"], "redelivery");
    assert_eq!(retried["attempts"], 1, "every attempt stays counted");
    let pending = json_of(&posture_api(
        &app.db,
        &[
            "deliveries",
            "list",
            "--customer",
            &id,
            "--status",
            "pending",
            "--json",
        ],
        None,
    ));
    assert_eq!(pending["data"].as_array().unwrap().len(), 1);
    let again = posture_api(&app.db, &["deliveries", "retry", delivery], None);
    assert!(
        !again.status.success(),
        "a pending delivery cannot be retried"
    );
    let refused = String::from_utf8_lossy(&again.stderr);
    assert!(
        refused.contains("is pending: it is queued and will be attempted by itself"),
        "{refused}"
    );
}

/// `POSTURE_SECRET_KEY` values of the rotation test: the server's key ([7; 32]), the new
/// one ([8; 32]) and an unrelated one ([9; 32]).
pub(crate) const KEY_7: &str = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";
pub(crate) const KEY_8: &str = "CAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAg=";
const KEY_9: &str = "CQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQk=";

pub(crate) fn reseal(db: &TestDb, current: &str, previous: &str) -> Output {
    use std::io::Write as _;
    let output = Command::new(env!("CARGO_BIN_EXE_posture-api"))
        .args(["secrets", "reseal", "--json"])
        .env("DATABASE_URL", db.runtime_url())
        .env("POSTURE_LOG", "warn")
        .env("POSTURE_SECRET_KEY", current)
        .env("POSTURE_SECRET_KEYS_PREVIOUS", previous)
        .output()
        .unwrap();
    std::io::stderr().write_all(&output.stderr).unwrap();
    output
}

#[tokio::test]
async fn resealing_moves_every_signing_secret_to_the_new_key_so_the_old_one_can_be_retired() {
    use posture_domain::{ports::WebhookRepository, secrets::Keyring};

    let app = crate::support::TestApp::start().await;
    let (customer, _) = app.customer("A").await;
    let (_, key) = app
        .key(customer, &[posture_domain::Scope::ManageWebhooks])
        .await;
    let mut created = Vec::new();
    for name in ["one", "two"] {
        let response = app
            .client
            .post(app.url("/api/v1/webhooks"))
            .bearer_auth(&key)
            .json(
                &serde_json::json!({"name": name, "webhookUrl": "https://example.com/hook",
                                      "webhookType": "generic", "eventTypes": ["finding_high"]}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        let body: Value = response.json().await.unwrap();
        let id: posture_domain::WebhookId = body["data"]["id"].as_str().unwrap().parse().unwrap();
        created.push((
            id,
            body["data"]["signingSecret"].as_str().unwrap().to_owned(),
        ));
    }
    // The first one is mid-rotation: its previous secret still signs, and moves too.
    let rotated: Value = app
        .client
        .post(app.url(&format!("/api/v1/webhooks/{}/rotate-secret", created[0].0)))
        .bearer_auth(&key)
        .json(&serde_json::json!({"gracePeriodSeconds": 3600}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let previous = std::mem::replace(
        &mut created[0].1,
        rotated["data"]["signingSecret"]
            .as_str()
            .unwrap()
            .to_owned(),
    );
    let opens_with = |keyring: Keyring| {
        let store = app.store.clone();
        let created = created.clone();
        let previous = previous.clone();
        async move {
            for (n, (id, secret)) in created.iter().enumerate() {
                let sealed = store.sealed_secrets(customer, *id).await.unwrap();
                let context = posture_domain::webhook::secret_context(customer.customer_id(), *id);
                match keyring.open(&sealed.current, &context) {
                    Ok(opened) if opened.expose() == secret => {}
                    _ => return false,
                }
                let old = sealed.previous.map(|p| keyring.open(&p, &context));
                match (n, old) {
                    (0, Some(Ok(opened))) if opened.expose() == previous => {}
                    (0, _) => return false,
                    (_, None) => {}
                    (_, Some(_)) => return false,
                }
            }
            true
        }
    };

    // Without the key that sealed them, nothing can be resealed: the command fails naming
    // that key's id and changes nothing.
    let old_id = crate::support::test_keyring().current_key_id().to_owned();
    let refused = reseal(&app.db, KEY_9, "");
    assert_eq!(refused.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(report["resealed"], 0);
    assert_eq!(report["unopened"][&old_id], 3, "two current, one previous");
    assert!(String::from_utf8_lossy(&refused.stderr).contains(&old_id));
    assert!(opens_with(crate::support::test_keyring()).await);

    // With the old key kept as a previous one, every secret moves to the new key.
    let moved = json_of(&reseal(&app.db, KEY_8, KEY_7));
    let new_id = Keyring::new(&[8; 32], &[])
        .unwrap()
        .current_key_id()
        .to_owned();
    assert_eq!(moved["currentKeyId"], new_id.as_str());
    assert_eq!(moved["resealed"], 3);
    assert!(opens_with(Keyring::new(&[8; 32], &[]).unwrap()).await);
    assert!(!opens_with(crate::support::test_keyring()).await);

    // Running it again finds nothing left to do, even without the retired key.
    let again = json_of(&reseal(&app.db, KEY_8, ""));
    assert_eq!(again["resealed"], 0);
    assert_eq!(again["unopened"], serde_json::json!({}));
}
