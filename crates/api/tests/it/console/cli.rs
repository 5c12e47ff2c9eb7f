//! The operator's part: `posture-api customers sso set|show|provisioning|clear`, operator issuance and
//! revocation in the customer's audit log, and `secrets reseal` moving client secrets.

use std::process::{Command, Output};

use posture_domain::{ports::ConsoleRepository, secrets::Keyring};

use super::support::customer;
use crate::{
    cli::{KEY_7, KEY_8, json_of, reseal},
    support::{TestApp, test_keyring},
};

const SECRET: &str = "the-client-secret-of-contoso";

fn posture_api(app: &TestApp, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_posture-api"))
        .args(args)
        .arg("--json")
        .env("DATABASE_URL", app.db.runtime_url())
        .env("POSTURE_LOG", "warn")
        .env("POSTURE_SECRET_KEY", KEY_7)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// `customers sso set` for `customer` with client id `posture` and `rest` of the arguments.
fn sso_set(
    app: &TestApp,
    customer: &str,
    issuer: &str,
    rest: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut args = vec![
        "customers",
        "sso",
        "set",
        "--customer",
        customer,
        "--issuer",
        issuer,
        "--client-id",
        "posture",
    ];
    args.extend_from_slice(rest);
    posture_api(app, &args, env)
}

fn set_sso(app: &TestApp, customer: &str, issuer: &str) -> Output {
    sso_set(
        app,
        customer,
        issuer,
        &[
            "--admin-claim",
            "groups",
            "--admin-value",
            "posture-admins",
            "--admin-subject",
            "root",
            // These tests name providers that do not exist; the check is tested below.
            "--no-check",
        ],
        &[("POSTURE_SSO_CLIENT_SECRET", SECRET)],
    )
}

#[tokio::test]
async fn sso_set_seals_the_client_secret_and_never_prints_it() {
    let app = TestApp::start().await;
    let (scope, id) = customer(&app, "Contoso").await;
    let output = set_sso(&app, &id, "https://login.contoso.example/v2.0");
    let set = json_of(&output);
    assert_eq!(set["issuer"], "https://login.contoso.example/v2.0");
    assert_eq!(set["adminClaim"], "groups");
    assert_eq!(set["adminValues"][0], "posture-admins");
    assert_eq!(set["adminSubjects"][0], "root");
    assert_eq!(set["redirectPath"], format!("/console/{id}/callback"));
    assert!(
        set["redirectUri"].is_null(),
        "unknown without the public URL"
    );
    let shown = json_of(&posture_api(
        &app,
        &["customers", "sso", "show", "--customer", &id],
        &[("POSTURE_PUBLIC_URL", "https://posture.example.com/")],
    ));
    assert_eq!(shown["clientId"], "posture");
    assert_eq!(
        shown["redirectUri"],
        format!("https://posture.example.com/console/{id}/callback"),
        "the exact URI to register at the provider"
    );
    for out in [&output.stdout, &output.stderr] {
        assert!(!String::from_utf8_lossy(out).contains(SECRET));
    }
    let setup = app.store.console_setup(scope).await.unwrap().unwrap();
    assert!(
        !setup
            .sealed_secret
            .ciphertext
            .windows(SECRET.len())
            .any(|w| w == SECRET.as_bytes())
    );
    let opened = test_keyring()
        .open_client_secret(&setup.sealed_secret, scope.customer_id())
        .unwrap();
    assert_eq!(opened.expose(), SECRET);

    // The provisioning requirement goes with the provider, and the answer says so.
    let claim = ["--match-claim", "email", "--admin-group", "Posture Admins"];
    let command = [
        &["customers", "sso", "provisioning", "--customer", &id][..],
        &claim,
    ]
    .concat();
    assert_eq!(
        json_of(&posture_api(&app, &command, &[]))["provisioning"]["matchClaim"],
        "email"
    );
    let cleared = json_of(&posture_api(
        &app,
        &["customers", "sso", "clear", "--customer", &id],
        &[],
    ));
    assert_eq!(cleared["removed"], true);
    assert_eq!(
        cleared["provisioningRemoved"],
        serde_json::json!({"matchClaim": "email", "adminGroup": "Posture Admins"})
    );
    assert!(app.store.console_setup(scope).await.unwrap().is_none());
}

#[tokio::test]
async fn sso_set_refuses_a_plain_http_issuer_and_a_rule_naming_no_admin() {
    let app = TestApp::start().await;
    let (_, id) = customer(&app, "Contoso").await;
    let insecure = set_sso(&app, &id, "http://login.contoso.example");
    assert!(!insecure.status.success());
    assert!(String::from_utf8_lossy(&insecure.stderr).contains("must be https"));
    let nobody = sso_set(
        &app,
        &id,
        "https://idp.example",
        &[],
        &[("POSTURE_SSO_CLIENT_SECRET", SECRET)],
    );
    assert!(!nobody.status.success());
    assert!(String::from_utf8_lossy(&nobody.stderr).contains("name the admins"));
}

#[tokio::test]
async fn sso_provisioning_requires_scim_provisioning_and_off_stops_requiring_it() {
    let app = TestApp::start().await;
    let (scope, id) = customer(&app, "Contoso").await;
    let provisioning = |args: &[&str]| {
        let mut all = vec![
            "customers",
            "sso",
            "provisioning",
            "--customer",
            id.as_str(),
        ];
        all.extend_from_slice(args);
        posture_api(&app, &all, &[])
    };
    let required = [
        "--match-claim",
        "email",
        "--admin-group",
        " Posture Admins ",
    ];
    let before_sso = provisioning(&required);
    assert_eq!(before_sso.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&before_sso.stderr).contains("customers sso set"));

    assert!(
        set_sso(&app, &id, "https://login.contoso.example/v2.0")
            .status
            .success()
    );
    let set = json_of(&provisioning(&required));
    assert_eq!(set["provisioning"]["matchClaim"], "email");
    assert_eq!(
        set["provisioning"]["adminGroup"], "Posture Admins",
        "trimmed"
    );
    assert_eq!(set["sessionsEnded"], 0);
    let shown = json_of(&posture_api(
        &app,
        &["customers", "sso", "show", "--customer", &id],
        &[],
    ));
    assert_eq!(shown["provisioning"], set["provisioning"]);
    let setup = app.store.console_setup(scope).await.unwrap().unwrap();
    assert_eq!(
        setup.sso.provisioning.unwrap().admin_group,
        "Posture Admins"
    );

    let off = json_of(&provisioning(&["--off"]));
    assert!(off["provisioning"].is_null());
    let setup = app.store.console_setup(scope).await.unwrap().unwrap();
    assert_eq!(setup.sso.provisioning, None);

    let blank = provisioning(&["--match-claim", "e mail", "--admin-group", "Admins"]);
    assert_eq!(blank.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&blank.stderr).contains("--match-claim"));
    for half in [
        &["--match-claim", "email"][..],
        &[][..],
        &["--off", "--admin-group", "Admins"][..],
    ] {
        let refused = provisioning(half);
        assert_eq!(refused.status.code(), Some(2), "{half:?}: a usage error");
    }
    let setup = app.store.console_setup(scope).await.unwrap().unwrap();
    assert_eq!(setup.sso.provisioning, None, "nothing refused was saved");
}

#[tokio::test]
async fn operator_issuance_and_revocation_from_the_cli_are_in_the_customers_audit_log() {
    let app = TestApp::start().await;
    let (scope, id) = customer(&app, "Contoso").await;
    let issued = json_of(&posture_api(
        &app,
        &[
            "keys",
            "issue",
            "--customer",
            &id,
            "--scope",
            "read:findings",
            "--name",
            "ci",
        ],
        &[],
    ));
    assert_eq!(issued["createdBy"], "posture operator");
    let key_id = issued["id"].as_str().unwrap();
    json_of(&posture_api(&app, &["keys", "revoke", key_id], &[]));
    let log = app.store.audit_log(scope, None, 10).await.unwrap();
    let actions: Vec<(&str, &str)> = log
        .iter()
        .map(|e| (e.action.as_str(), e.actor_kind.as_str()))
        .collect();
    assert_eq!(
        actions,
        [("key.revoked", "operator"), ("key.issued", "operator")]
    );
    let key = log[0].key.as_ref().unwrap();
    assert_eq!(key.id.to_string(), key_id);
    assert_eq!(key.name, "ci");
}

#[tokio::test]
async fn resealing_moves_console_client_secrets_to_the_new_key() {
    let app = TestApp::start().await;
    let (scope, id) = customer(&app, "Contoso").await;
    json_of(&set_sso(&app, &id, "https://login.contoso.example"));
    let moved = json_of(&reseal(&app.db, KEY_8, KEY_7));
    assert_eq!(moved["clientSecretsResealed"], 1);
    let setup = app.store.console_setup(scope).await.unwrap().unwrap();
    let new = Keyring::new(&[8; 32], &[]).unwrap();
    assert_eq!(setup.sealed_secret.key_id, new.current_key_id());
    let opened = new
        .open_client_secret(&setup.sealed_secret, scope.customer_id())
        .unwrap();
    assert_eq!(opened.expose(), SECRET);
}

#[tokio::test]
async fn changing_who_can_be_an_admin_ends_the_sessions_and_both_commands_are_audited() {
    let app = TestApp::start().await;
    let (scope, id) = customer(&app, "Contoso").await;
    let issuer = "https://login.contoso.example/v2.0";
    assert_eq!(json_of(&set_sso(&app, &id, issuer))["sessionsEnded"], 0);
    let alice = super::support::admin(&app, scope, "alice").await;
    let keys = format!("/console/{id}/keys");
    let signed_in = |admin: &super::support::Admin| {
        let (app, keys) = (&app, &keys);
        let cookie = admin.cookie();
        async move {
            super::support::browser()
                .get(app.url(keys))
                .header(reqwest::header::COOKIE, cookie)
                .send()
                .await
                .unwrap()
                .status()
                == reqwest::StatusCode::OK
        }
    };
    assert!(signed_in(&alice).await);
    // The same provider and rule (a new client secret): the session stays.
    assert_eq!(json_of(&set_sso(&app, &id, issuer))["sessionsEnded"], 0);
    assert!(signed_in(&alice).await);
    // Another issuer: who is an admin may have changed, so the sessions end.
    let moved = json_of(&set_sso(&app, &id, "https://idp.contoso.example"));
    assert_eq!(moved["sessionsEnded"], 1);
    assert!(
        !signed_in(&alice).await,
        "the session of the old provider ended"
    );
    let bob = super::support::admin(&app, scope, "bob").await;
    let cleared = json_of(&posture_api(
        &app,
        &["customers", "sso", "clear", "--customer", &id],
        &[],
    ));
    assert_eq!(
        (cleared["removed"].clone(), cleared["sessionsEnded"].clone()),
        (true.into(), 1.into())
    );
    assert!(!signed_in(&bob).await);

    let log = app.store.audit_log(scope, None, 10).await.unwrap();
    let lines: Vec<(&str, &str)> = log
        .iter()
        .map(|e| (e.action.as_str(), e.detail.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(
        lines,
        [
            ("sso.cleared", "1 console session ended"),
            ("session.signed_in", ""),
            (
                "sso.set",
                "issuer https://idp.contoso.example; 1 console session ended"
            ),
            (
                "sso.set",
                "issuer https://login.contoso.example/v2.0; the same admins: console sessions kept"
            ),
            ("session.signed_in", ""),
            (
                "sso.set",
                "issuer https://login.contoso.example/v2.0; no console session was open"
            ),
        ]
    );
    // The settings' lines are the operator's; the sign-ins, the admins'. None names a key.
    assert!(log.iter().all(|e| e.key.is_none()));
    assert!(
        log.iter()
            .all(|e| (e.actor_kind == "operator") == e.action.starts_with("sso."))
    );
}

#[tokio::test]
async fn serve_reachable_from_elsewhere_needs_its_public_url_while_the_console_is_on() {
    let app = TestApp::start().await;
    let serve = |extra: &[(&str, &str)]| {
        Command::new(env!("CARGO_BIN_EXE_posture-api"))
            .arg("serve")
            .env("DATABASE_URL", app.db.runtime_url())
            .env("POSTURE_LOG", "warn")
            .env("POSTURE_SECRET_KEY", KEY_7)
            .env("POSTURE_BIND", "0.0.0.0:0")
            .envs(extra.iter().copied())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    // The request's Host (or a client's Forwarded header) must not choose where a sign-in
    // returns to: without POSTURE_PUBLIC_URL, serve does not start.
    let refused = serve(&[]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("POSTURE_PUBLIC_URL is required"),
        "{stderr}"
    );
}

#[tokio::test]
async fn sso_set_without_a_client_secret_names_the_variable_to_set() {
    let app = TestApp::start().await;
    let (_, id) = customer(&app, "Contoso").await;
    let output = sso_set(
        &app,
        &id,
        "https://login.contoso.example/v2.0",
        &["--admin-subject", "root"],
        &[],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("POSTURE_SSO_CLIENT_SECRET"), "{stderr}");
}

#[tokio::test]
async fn sso_set_asks_the_issuer_first_and_saves_nothing_when_it_does_not_answer() {
    let app = TestApp::start().await;
    let (scope, id) = customer(&app, "Contoso").await;
    let set = |issuer: &str, networks: &str| {
        sso_set(
            &app,
            &id,
            issuer,
            &["--admin-subject", "root"],
            &[
                ("POSTURE_SSO_CLIENT_SECRET", SECRET),
                ("POSTURE_SSO_ALLOWED_NETWORKS", networks),
            ],
        )
    };
    // Nothing answers there: the command fails naming the issuer, and nothing is saved.
    let closed = format!(
        "http://127.0.0.1:{}",
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    );
    let refused = set(&closed, "127.0.0.0/8");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains(&closed), "{stderr}");
    assert!(stderr.contains("Nothing was saved"), "{stderr}");
    assert!(app.store.console_setup(scope).await.unwrap().is_none());
    // A provider inside the network is asked through the same rules as a sign-in: refused
    // until its network is allowed, then saved.
    let provider = super::provider::Provider::start().await;
    let outside = set(&provider.issuer(), "");
    assert!(
        !outside.status.success(),
        "a loopback provider without the allow-list"
    );
    assert!(app.store.console_setup(scope).await.unwrap().is_none());
    let saved = json_of(&set(&provider.issuer(), "127.0.0.0/8"));
    assert_eq!(saved["issuer"], provider.issuer());
    assert!(app.store.console_setup(scope).await.unwrap().is_some());
}

#[tokio::test]
async fn the_sign_in_button_names_the_provider_as_the_operator_chose() {
    let app = TestApp::start().await;
    let (_, id) = customer(&app, "Contoso").await;
    let set = |rest: &[&str]| {
        let mut args = vec!["--admin-subject", "root", "--no-check"];
        args.extend_from_slice(rest);
        sso_set(
            &app,
            &id,
            "https://login.microsoftonline.example:8443/contoso/v2.0",
            &args,
            &[("POSTURE_SSO_CLIENT_SECRET", SECRET)],
        )
    };
    let sign_in_page = || async {
        let response = super::support::page(&app, &format!("/console/{id}/"), None).await;
        super::support::html(response, reqwest::StatusCode::OK).await
    };
    // Without a display name: the issuer's host and port.
    let plain = json_of(&set(&[]));
    assert!(plain["displayName"].is_null());
    assert_eq!(plain["providerName"], "login.microsoftonline.example:8443");
    assert!(
        sign_in_page()
            .await
            .contains("Sign in with login.microsoftonline.example:8443")
    );
    // With one, trimmed.
    let named = json_of(&set(&["--display-name", "  Contoso Entra ID "]));
    assert_eq!(named["displayName"], "Contoso Entra ID");
    assert!(
        sign_in_page()
            .await
            .contains("Sign in with Contoso Entra ID")
    );
    // Blank, control characters or too long: refused in words, nothing changed.
    let long = "x".repeat(101);
    for bad in ["   ", "Contoso\u{7}Entra", long.as_str()] {
        let refused = set(&["--display-name", bad]);
        assert!(!refused.status.success());
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("--display-name"), "{stderr}");
    }
    assert!(
        sign_in_page()
            .await
            .contains("Sign in with Contoso Entra ID")
    );
    // The name is HTML-escaped like everything else on the page.
    json_of(&set(&["--display-name", "<b>Contoso</b>"]));
    let page = sign_in_page().await;
    assert!(
        page.contains("Sign in with &lt;b&gt;Contoso&lt;/b&gt;"),
        "{page}"
    );
}
