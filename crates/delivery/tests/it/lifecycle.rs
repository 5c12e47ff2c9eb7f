//! Lifecycle events (opt-in): a pass that resolves, suppresses, reopens or re-rates findings
//! the customer already had queues `finding_resolved`, `finding_suppressed`,
//! `finding_reopened` and `finding_severity_changed` deliveries, each finding with its change.

use std::collections::BTreeMap;

use posture_test_support::fixtures;
use serde_json::{Value, json};

use crate::support::{Setup, hook_url, receiver};

fn finding(id: &str, tenant: &str, severity: &str, status: &str) -> Value {
    fixtures::finding(id, tenant, severity, status, "u1")
}

/// The bodies received, by event type.
async fn bodies(server: &wiremock::MockServer) -> BTreeMap<String, Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            (body["type"].as_str().unwrap().to_owned(), body)
        })
        .collect()
}

#[tokio::test]
async fn a_pass_queues_one_event_per_kind_of_change_each_finding_with_its_change() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let identity = fixtures::identity("u1", &tenant, "Ada");
    setup
        .pass(
            customer,
            &[
                identity.clone(),
                finding("f1", &tenant, "high", "open"),
                finding("f2", &tenant, "low", "open"),
                finding("f3", &tenant, "medium", "resolved"),
                finding("f4", &tenant, "high", "open"),
            ],
        )
        .await;
    let (lifecycle, _, _) = setup
        .subscribed(
            customer,
            200,
            &[
                "finding_resolved",
                "finding_reopened",
                "finding_severity_changed",
                "finding_suppressed",
            ],
        )
        .await;
    let (severities, _, _) = setup
        .subscribed(
            customer,
            200,
            &["finding_critical", "finding_high", "finding_low"],
        )
        .await;

    let summary = setup
        .pass(
            customer,
            &[
                identity,
                finding("f1", &tenant, "high", "resolved"),
                finding("f2", &tenant, "critical", "open"),
                finding("f3", &tenant, "medium", "open"),
                finding("f4", &tenant, "high", "suppressed"),
            ],
        )
        .await;
    assert_eq!(summary.counts.deliveries, 4, "one per kind of change");
    assert_eq!(setup.worker(true).drain().await.unwrap(), 4);
    assert!(
        severities.received_requests().await.unwrap().is_empty(),
        "finding_<severity> subscriptions get nothing new: no finding is new"
    );
    let bodies = bodies(&lifecycle).await;
    let only = |event: &str| -> (Vec<String>, Vec<Value>) {
        let findings = bodies[event]["data"]["findings"].as_array().unwrap();
        (
            findings
                .iter()
                .map(|f| f["id"].as_str().unwrap().to_owned())
                .collect(),
            findings.iter().map(|f| f["change"].clone()).collect(),
        )
    };
    assert_eq!(
        only("finding_resolved"),
        (
            vec!["f1".into()],
            vec![json!({"field": "status", "from": "open", "to": "resolved"})]
        )
    );
    assert_eq!(
        only("finding_reopened"),
        (
            vec!["f3".into()],
            vec![json!({"field": "status", "from": "resolved", "to": "open"})]
        )
    );
    assert_eq!(
        only("finding_severity_changed"),
        (
            vec!["f2".into()],
            vec![json!({"field": "severity", "from": "low", "to": "critical"})]
        )
    );
    assert_eq!(
        only("finding_suppressed"),
        (
            vec!["f4".into()],
            vec![json!({"field": "status", "from": "open", "to": "suppressed"})]
        )
    );
    assert_eq!(
        bodies["finding_suppressed"]["data"]["findings"][0]["status"],
        "suppressed"
    );
    let resolved = &bodies["finding_resolved"]["data"]["findings"][0];
    assert_eq!(resolved["status"], "resolved", "the finding as it is now");
    assert_eq!(
        bodies["finding_resolved"]["analyzerPassId"],
        summary.pass_id.to_string().as_str()
    );
}

#[tokio::test]
async fn chat_receivers_are_told_how_many_findings_changed_and_a_re_report_sends_nothing() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let identity = fixtures::identity("u1", &tenant, "Ada");
    let open: Vec<Value> = (1..=3)
        .map(|n| finding(&format!("f{n}"), &tenant, "high", "open"))
        .collect();
    setup
        .pass(customer, &[vec![identity.clone()], open.clone()].concat())
        .await;
    let slack = receiver(200).await;
    setup
        .subscribe_as(customer, &hook_url(&slack), "slack", &["finding_resolved"])
        .await;
    let resolved: Vec<Value> = (1..=3)
        .map(|n| finding(&format!("f{n}"), &tenant, "high", "resolved"))
        .collect();
    setup
        .pass(
            customer,
            &[vec![identity.clone()], resolved.clone()].concat(),
        )
        .await;
    // The same report again: nothing changed, nothing is sent.
    let again = setup
        .pass(customer, &[vec![identity], resolved].concat())
        .await;
    assert_eq!(again.counts.deliveries, 0);
    assert_eq!(setup.worker(true).drain().await.unwrap(), 1);
    let body = String::from_utf8(slack.received_requests().await.unwrap()[0].body.clone()).unwrap();
    assert!(body.contains("3 findings resolved"), "{body}");
}

#[tokio::test]
async fn without_a_lifecycle_subscription_a_pass_queues_no_lifecycle_event() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let identity = fixtures::identity("u1", &tenant, "Ada");
    setup
        .pass(
            customer,
            &[identity.clone(), finding("f1", &tenant, "high", "open")],
        )
        .await;
    let (_server, _, _) = setup.subscribed(customer, 200, &["finding_high"]).await;
    let summary = setup
        .pass(
            customer,
            &[identity, finding("f1", &tenant, "high", "resolved")],
        )
        .await;
    assert_eq!(summary.counts.deliveries, 0);
}
