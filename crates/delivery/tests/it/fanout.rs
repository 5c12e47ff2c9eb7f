//! Which deliveries a pass queues, and what they carry.

use std::collections::BTreeSet;

use posture_domain::{delivery::DeliveryStatus, ports::WebhookRepository, signature::verify};
use serde_json::Value;

use crate::support::{Setup, finding, hook_url, receiver};

#[tokio::test]
async fn a_pass_delivers_one_signed_post_per_subscribed_severity_with_new_findings() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let (server, _, secret) = setup
        .subscribed(customer, 200, &["finding_critical", "finding_high"])
        .await;
    let summary = setup
        .pass(
            customer,
            &[
                finding("c1", &tenant, "critical"),
                finding("c2", &tenant, "critical"),
                finding("h1", &tenant, "high"),
                finding("l1", &tenant, "low"),
            ],
        )
        .await;
    assert_eq!(summary.counts.deliveries, 2);
    assert_eq!(setup.worker(true).drain().await.unwrap(), 2);

    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        requests.len(),
        2,
        "one per subscribed severity; nothing for low"
    );
    let mut seen = BTreeSet::new();
    for request in &requests {
        let header = |name: &str| {
            request
                .headers
                .get(name)
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(header("content-type"), "application/json");
        assert!(header("user-agent").starts_with("posture-webhooks/"));
        let signature = header("x-service-signature-256");
        assert!(
            verify(&secret, &request.body, &signature),
            "signature over the raw body"
        );
        let event = header("x-service-event");
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["type"], event.as_str());
        assert_eq!(body["id"], header("x-service-delivery").as_str());
        assert_eq!(body["analyzerPassId"], summary.pass_id.to_string().as_str());
        let ids: Vec<&str> = body["data"]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["id"].as_str().unwrap())
            .collect();
        match event.as_str() {
            "finding_critical" => assert_eq!(ids, vec!["c1", "c2"]),
            "finding_high" => assert_eq!(ids, vec!["h1"]),
            other => panic!("unexpected event {other}"),
        }
        let first = &body["data"]["findings"][0];
        assert_eq!(
            first["identity"]["id"], "u1",
            "findings as the API shows them"
        );
        assert_eq!(first["cloudTenantId"], tenant.as_str());
        seen.insert(event);
    }
    assert_eq!(seen.len(), 2);
    assert!(
        setup
            .deliveries(customer)
            .await
            .iter()
            .all(|d| d.status == DeliveryStatus::Delivered)
    );
}

#[tokio::test]
async fn findings_seen_in_an_earlier_pass_are_not_delivered_again() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let server = receiver(200).await;
    setup
        .one_delivery_to(customer, &tenant, &hook_url(&server), "critical")
        .await;
    let again = setup
        .pass(
            customer,
            &[
                finding("c1", &tenant, "critical"),
                finding("c2", &tenant, "critical"),
            ],
        )
        .await;
    assert_eq!(again.counts.new_findings, 1);
    setup.worker(true).drain().await.unwrap();
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    let last: Value = serde_json::from_slice(
        &requests
            .iter()
            .find(|r| {
                serde_json::from_slice::<Value>(&r.body).unwrap()["analyzerPassId"]
                    == again.pass_id.to_string().as_str()
            })
            .unwrap()
            .body,
    )
    .unwrap();
    let ids: Vec<&str> = last["data"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["c2"], "only the finding new in that pass");
}

#[tokio::test]
async fn nothing_goes_to_another_customers_or_a_deactivated_subscription() {
    let setup = Setup::new().await;
    let (a, tenant) = setup.customer("A").await;
    let (b, _) = setup.customer("B").await;
    let others = receiver(200).await;
    let deactivated = receiver(200).await;
    setup
        .subscribe(b, &hook_url(&others), &["finding_critical"])
        .await;
    let (id, _) = setup
        .subscribe(a, &hook_url(&deactivated), &["finding_critical"])
        .await;
    setup.store.deactivate_subscription(a, id).await.unwrap();
    let summary = setup.pass(a, &[finding("c1", &tenant, "critical")]).await;
    assert_eq!(summary.counts.deliveries, 0);
    setup.worker(true).drain().await.unwrap();
    assert!(others.received_requests().await.unwrap().is_empty());
    assert!(deactivated.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn one_hundred_fifty_new_findings_make_two_deliveries_of_100_and_50() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let (server, _, _) = setup.subscribed(customer, 200, &["finding_critical"]).await;
    let records: Vec<Value> = (0..150)
        .map(|i| finding(&format!("c{i:03}"), &tenant, "critical"))
        .collect();
    assert_eq!(setup.pass(customer, &records).await.counts.deliveries, 2);
    setup.worker(true).drain().await.unwrap();
    let mut sizes: Vec<usize> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            serde_json::from_slice::<Value>(&r.body).unwrap()["data"]["findings"]
                .as_array()
                .unwrap()
                .len()
        })
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes, vec![50, 100]);
}

#[tokio::test]
async fn deactivating_a_subscription_cancels_its_pending_deliveries() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let (server, id, _) = setup.subscribed(customer, 200, &["finding_high"]).await;
    setup
        .pass(customer, &[finding("h1", &tenant, "high")])
        .await;
    setup
        .store
        .deactivate_subscription(customer, id)
        .await
        .unwrap();
    assert_eq!(setup.worker(true).drain().await.unwrap(), 0);
    assert!(server.received_requests().await.unwrap().is_empty());
    let deliveries = setup.deliveries(customer).await;
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].status, DeliveryStatus::Cancelled);
    assert_eq!(setup.db.assert_delivery_totals().await, 1);
}

#[tokio::test]
async fn slack_and_teams_subscriptions_get_their_renderings_signed_too() {
    let setup = Setup::new().await;
    let (customer, tenant) = setup.customer("A").await;
    let slack = receiver(200).await;
    let teams = receiver(200).await;
    let (_, slack_secret) = setup
        .subscribe_as(customer, &hook_url(&slack), "slack", &["finding_critical"])
        .await;
    let (_, teams_secret) = setup
        .subscribe_as(customer, &hook_url(&teams), "teams", &["finding_critical"])
        .await;
    let mut record = finding("c1", &tenant, "critical");
    record["title"] = "<@here> & <https://evil.example|click>".into();
    setup.pass(customer, &[record]).await;
    setup.worker(true).drain().await.unwrap();
    let slack_request = &slack.received_requests().await.unwrap()[0];
    let teams_request = &teams.received_requests().await.unwrap()[0];
    for (request, secret) in [
        (slack_request, &slack_secret),
        (teams_request, &teams_secret),
    ] {
        let header = request
            .headers
            .get("x-service-signature-256")
            .unwrap()
            .to_str()
            .unwrap();
        assert!(verify(secret, &request.body, header));
    }
    let message: Value = serde_json::from_slice(&slack_request.body).unwrap();
    assert_eq!(message["text"], "posture: 1 new critical finding");
    let section = message["blocks"][1]["text"]["text"].as_str().unwrap();
    assert!(
        section.contains("&lt;@here&gt; &amp; &lt;https://evil.example|click&gt;"),
        "{section}"
    );
    let card: Value = serde_json::from_slice(&teams_request.body).unwrap();
    assert_eq!(card["type"], "message");
    assert_eq!(
        card["attachments"][0]["contentType"],
        "application/vnd.microsoft.card.adaptive"
    );
    assert_eq!(card["attachments"][0]["content"]["version"], "1.4");
}

/// The delivery log's totals (migration `2026-11-28-000027_delivery_log_totals`) come to
/// databases that hold deliveries already: its `down.sql` takes them away, and applying it
/// again counts every delivery there, by status, and keeps counting after.
#[tokio::test]
async fn the_totals_migration_counts_the_deliveries_already_there() {
    let setup = Setup::new().await;
    if setup.db.on_citus() {
        // Reverting fails there (`TestDb::revert_last_migration`); the Citus suite
        // distributes a database with deliveries in place instead.
        eprintln!("on PostgreSQL only");
        return;
    }
    let (customer, tenant) = setup.customer("A").await;
    let (_server, _, _) = setup
        .subscribed(customer, 200, &["finding_critical", "finding_high"])
        .await;
    // Deliveries of every state first (this build's passes and worker need the
    // migrations after the totals'), then the totals taken away with the migrations after
    // them.
    setup
        .pass(
            customer,
            &[
                finding("c1", &tenant, "critical"),
                finding("h1", &tenant, "high"),
            ],
        )
        .await;
    assert_eq!(setup.worker(true).drain().await.unwrap(), 2);
    setup
        .pass(
            customer,
            &[
                finding("c1", &tenant, "critical"),
                finding("h1", &tenant, "high"),
                finding("c2", &tenant, "critical"),
            ],
        )
        .await;
    setup.db.revert_through("20261128000027").await;

    let applied = setup.db.migrate().await;
    assert_eq!(
        applied.first().map(|v| v.replace('-', "")).as_deref(),
        Some("20261128000027"),
        "{applied:?}"
    );
    assert_eq!(
        setup.db.assert_delivery_totals().await,
        3,
        "two delivered, one pending"
    );
    assert_eq!(setup.worker(true).drain().await.unwrap(), 1);
    assert_eq!(setup.db.assert_delivery_totals().await, 3);
}
