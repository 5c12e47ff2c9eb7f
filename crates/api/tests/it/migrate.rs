//! `posture-api migrate`, run as the real binary by the role that owns the schema, with and
//! without `--runtime-role` (docs/operations.md, "Database roles").

use std::process::{Command, Output};

use posture_test_support::{RUNTIME_ROLE, TestDb};

fn migrate(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_posture-api"))
        .arg("migrate")
        .args(args)
        .env("DATABASE_URL", url)
        .env("POSTURE_LOG", "warn")
        .output()
        .unwrap()
}

#[tokio::test]
async fn migrate_with_a_runtime_role_lets_that_role_serve_but_not_change_the_schema() {
    let db = TestDb::empty().await;
    let output = migrate(db.url(), &["--runtime-role", RUNTIME_ROLE, "--json"]);
    let json = crate::cli::json_of(&output);
    assert!(!json["applied"].as_array().unwrap().is_empty(), "{json}");
    assert_eq!(json["runtimeRole"], RUNTIME_ROLE);

    // The runtime role reads the schema state (what `serve` does at start) but cannot migrate.
    let as_runtime = migrate(&db.runtime_url(), &["--json"]);
    let stderr = String::from_utf8_lossy(&as_runtime.stderr);
    assert!(!as_runtime.status.success(), "the runtime role migrated");
    assert!(stderr.contains("permission denied"), "{stderr}");

    // Again without the flag: nothing to apply, the grants are left as they are.
    let again = crate::cli::json_of(&migrate(db.url(), &["--json"]));
    assert_eq!(again["applied"], serde_json::json!([]));
    assert_eq!(again["runtimeRole"], serde_json::Value::Null);
}

#[tokio::test]
async fn migrate_names_a_runtime_role_that_does_not_exist_and_how_to_create_it() {
    let db = TestDb::empty().await;
    let output = migrate(db.url(), &["--runtime-role", "posture_no_such_role"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("posture_no_such_role does not exist")
            && stderr.contains("CREATE ROLE posture_no_such_role LOGIN"),
        "{stderr}"
    );
}

#[tokio::test]
async fn migrate_refuses_a_runtime_role_that_is_not_a_plain_name_before_connecting() {
    let output = migrate(
        "postgres://nobody@127.0.0.1:1/none",
        &["--runtime-role", "app; DROP TABLE api_keys"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--runtime-role") && stderr.contains("not a plain role name"),
        "{stderr}"
    );
}
