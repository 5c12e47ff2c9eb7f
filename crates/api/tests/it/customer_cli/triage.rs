//! `posture findings triage`: the flags of the docs write the triage the API reads back,
//! each request with an `Idempotency-Key` of its own, more than 500 ids in several requests.

use clap::Parser as _;
use posture_cli::{
    args::{Cli, Command, FindingsCommand},
    triage,
};
use posture_domain::Scope;
use posture_test_support::fixtures;
use reqwest::StatusCode;

use super::cli;
use crate::support::TestApp;

/// Every outcome of a triage, as the command shows them one by one.
async fn run(
    api: &posture_cli::client::Api,
    ids: &[String],
    wanted: &triage::Triage,
) -> Vec<triage::Outcome> {
    let mut outcomes = Vec::new();
    let missed = triage::triage(api, ids, wanted, &mut |o| outcomes.push(o.clone()))
        .await
        .unwrap();
    assert_eq!(missed, outcomes.iter().filter(|o| !o.triaged()).count());
    outcomes
}

/// The triage the command line `args` asks for, as `posture findings triage` parses it.
fn flags(args: &[&str]) -> (Vec<String>, triage::Triage) {
    let cli = Cli::try_parse_from(["posture", "findings", "triage"].iter().chain(args)).unwrap();
    match cli.command {
        Command::Findings {
            command: FindingsCommand::Triage(args),
        } => (args.ids.clone(), args.triage()),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_documented_flags_triage_findings_and_say_what_happened() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer_with_one_of_each("A").await;
    app.ingest(
        customer,
        &[
            fixtures::finding("f-1", &tenant, "high", "open", "u1"),
            fixtures::finding("f-2", &tenant, "low", "open", "u1"),
        ],
    )
    .await;
    let (_, key) = app
        .key(customer, &[Scope::ReadFindings, Scope::WriteFindings])
        .await;
    let (api, _) = cli(&app, &key);
    let state = |id: &'static str| {
        let (app, key) = (&app, &key);
        async move {
            app.get_json(&format!("/api/v1/findings/{id}"), key, StatusCode::OK)
                .await["data"]["triage"]
                .clone()
        }
    };

    // docs/cli.md's lines, as there (a date within the year an expiry may be ahead).
    let until = (chrono::Utc::now() + chrono::Duration::days(120))
        .date_naive()
        .to_string();
    let (ids, wanted) = flags(&[
        "f-1",
        "f-2",
        "f-404",
        "--accept-risk",
        "compensating_control",
        "--until",
        &until,
        "--comment",
        "CA policy covers it",
    ]);
    let outcomes = run(&api, &ids, &wanted).await;
    let said: Vec<String> = outcomes
        .iter()
        .map(|o| triage::render(o, &wanted))
        .collect();
    let accepted = format!("risk_accepted (compensating_control) until {until}T00:00:00Z");
    assert_eq!(
        said,
        [
            format!("f-1: {accepted}"),
            format!("f-2: {accepted}"),
            "f-404: not found (no finding of yours has this id)".to_owned(),
        ]
    );
    let f1 = state("f-1").await;
    assert_eq!(f1["state"], "risk_accepted");
    assert_eq!(f1["reason"], "compensating_control");
    assert_eq!(f1["comment"], "CA policy covers it");
    assert_eq!(f1["expiresAt"], format!("{until}T00:00:00Z"));

    let (ids, wanted) = flags(&["f-1", "--dismiss", "false_positive"]);
    run(&api, &ids, &wanted).await;
    assert_eq!(state("f-1").await["state"], "dismissed");
    let (ids, wanted) = flags(&["f-1", "--acknowledge"]);
    run(&api, &ids, &wanted).await;
    assert_eq!(state("f-1").await["state"], "acknowledged");
    let (ids, wanted) = flags(&["f-1", "--reset"]);
    run(&api, &ids, &wanted).await;
    let f1 = state("f-1").await;
    assert_eq!(f1["state"], "untriaged");
    assert!(f1.get("reason").is_none_or(|r| r.is_null()), "{f1}");

    // Each of the four requests carried an Idempotency-Key of its own: four kept answers.
    let kept = app
        .db
        .execute("DELETE FROM idempotency_keys WHERE status = 200")
        .await;
    assert_eq!(kept, 4, "one per request");
}

#[tokio::test]
async fn more_than_500_ids_go_in_several_requests_and_a_refusal_is_said() {
    let app = TestApp::start().await;
    let (customer, tenant) = app.customer_with_one_of_each("A").await;
    app.ingest(
        customer,
        &[fixtures::finding("f-1", &tenant, "high", "open", "u1")],
    )
    .await;
    let (_, key) = app
        .key(customer, &[Scope::ReadFindings, Scope::WriteFindings])
        .await;
    let (api, _) = cli(&app, &key);
    let mut args: Vec<String> = (0..700).map(|i| format!("f-x{i}")).collect();
    args.push("f-1".into());
    // An id given twice is asked once.
    args.push("f-x3".into());
    args.push("--acknowledge".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ids, wanted) = flags(&args);
    let outcomes = run(&api, &ids, &wanted).await;
    assert_eq!(outcomes.len(), 701);
    assert_eq!(
        outcomes.iter().filter(|o| o.triaged()).count(),
        1,
        "f-1 only"
    );
    assert_eq!(outcomes[700].id, "f-1");
    let requests = app
        .db
        .execute("DELETE FROM idempotency_keys WHERE status = 200")
        .await;
    assert_eq!(requests, 2);

    // A key without write:findings is told so, in words.
    let (_, reader) = app.key(customer, &[Scope::ReadFindings]).await;
    let (api, _) = cli(&app, &reader);
    let (ids, wanted) = flags(&["f-1", "--acknowledge"]);
    let err = triage::triage(&api, &ids, &wanted, &mut |_| {})
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with("the key may not do this"),
        "{err}"
    );
}
