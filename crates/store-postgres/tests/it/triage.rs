//! Triage in PostgreSQL: a mark written under the finding's tag, kept by passes, expiring on
//! the store's clock, filtered, recorded in the history, and carried by the sync contract.

use std::time::Duration as StdDuration;

use chrono::Duration;
use posture_domain::{
    Error, FindingId, KeyId, PageRequest, Scope, ScopeSet,
    api_key::NewApiKey,
    clock::Clock as _,
    console::Actor,
    finding::FindingFilter,
    page::ListOrder,
    ports::{ApiKeyRepository, FindingRepository},
    triage::{TriageChange, TriageReason, TriageState},
    triage_bulk::BulkOutcome,
};
use posture_test_support::{
    TestDb,
    fixtures::{self, customer, finding, identity, ingest, lines, tenant},
};

/// A customer with findings `f1` and `f2`, and a key of it named "SOAR".
pub(crate) async fn setup(
    store: &posture_store_postgres::PgStore,
    name: &str,
) -> (posture_domain::CustomerScope, KeyId, String) {
    let scope = customer(store, name).await;
    let t = fixtures::tenant_id();
    let pass = lines(&[
        tenant(&t, "Contoso"),
        identity("u1", &t, "Ada"),
        finding("f1", &t, "high", "open", "u1"),
        finding("f2", &t, "low", "open", "u1"),
    ]);
    ingest(store, scope, &pass).await.unwrap();
    let (key, _) = NewApiKey::generate(
        scope.customer_id(),
        "SOAR".into(),
        [Scope::ReadFindings].into_iter().collect::<ScopeSet>(),
        None,
        chrono::Utc::now(),
    )
    .unwrap();
    let key = store.insert_key(key, &Actor::Operator).await.unwrap().id;
    (scope, key, pass)
}

pub(crate) fn id(text: &str) -> FindingId {
    text.parse().unwrap()
}

pub(crate) fn dismiss(now: chrono::DateTime<chrono::Utc>, days: Option<i64>) -> TriageChange {
    TriageChange::new(
        TriageState::Dismissed,
        Some(TriageReason::FalsePositive),
        Some("break-glass account".into()),
        days.map(|d| now + Duration::days(d)),
        now,
    )
    .unwrap()
}

#[tokio::test]
async fn a_mark_is_written_by_its_key_kept_by_passes_and_recorded() {
    let db = TestDb::new().await;
    let (store, clock) = db.store_with_clock();
    let (scope, key, pass) = setup(&store, "A").await;
    let before = store.get_finding(scope, &id("f1")).await.unwrap();
    assert_eq!(before.triage.state, TriageState::Untriaged);
    let after = store
        .triage_finding(scope, &id("f1"), &dismiss(clock.now(), None), key, None)
        .await
        .unwrap();
    assert_eq!(after.triage.state, TriageState::Dismissed);
    assert_eq!(after.triage.reason, Some(TriageReason::FalsePositive));
    let by = after.triage.updated_by.clone().unwrap();
    assert_eq!((by.key_id, by.key_name.as_str()), (key, "SOAR"));
    assert!(
        after.modified_at > before.modified_at,
        "a triage is a change"
    );
    assert_ne!(after.tag(), before.tag());
    // The analyzer reports it again: the mark stays.
    ingest(&store, scope, &pass).await.unwrap();
    let again = store.get_finding(scope, &id("f1")).await.unwrap();
    assert_eq!(again.triage, after.triage);
    // The history, newest first.
    let reset = TriageChange::new(TriageState::Untriaged, None, None, None, clock.now()).unwrap();
    store
        .triage_finding(scope, &id("f1"), &reset, key, None)
        .await
        .unwrap();
    let history = store
        .triage_history(scope, &id("f1"), PageRequest::new(Some(10), None).unwrap())
        .await
        .unwrap();
    let steps: Vec<_> = history.items.iter().map(|r| (r.from, r.to)).collect();
    assert_eq!(
        steps,
        [
            (TriageState::Dismissed, TriageState::Untriaged),
            (TriageState::Untriaged, TriageState::Dismissed)
        ]
    );
    assert_eq!(history.total, 2);
    assert_eq!(
        history.items[1].comment.as_deref(),
        Some("break-glass account")
    );
}

#[tokio::test]
async fn if_match_holds_only_for_the_current_tag() {
    let db = TestDb::new().await;
    let (store, clock) = db.store_with_clock();
    let (scope, key, _) = setup(&store, "A").await;
    let read = store.get_finding(scope, &id("f1")).await.unwrap().tag();
    let ack = TriageChange::new(TriageState::Acknowledged, None, None, None, clock.now()).unwrap();
    store
        .triage_finding(
            scope,
            &id("f1"),
            &ack,
            key,
            Some(std::slice::from_ref(&read)),
        )
        .await
        .unwrap();
    // A second writer holding the same (now old) tag loses.
    let late = store
        .triage_finding(
            scope,
            &id("f1"),
            &dismiss(clock.now(), None),
            key,
            Some(&[read]),
        )
        .await;
    assert!(
        matches!(late, Err(Error::PreconditionFailed(_))),
        "{late:?}"
    );
    let now = store.get_finding(scope, &id("f1")).await.unwrap();
    assert_eq!(
        now.triage.state,
        TriageState::Acknowledged,
        "the loser wrote nothing"
    );
    let history = store
        .triage_history(scope, &id("f1"), PageRequest::new(Some(10), None).unwrap())
        .await
        .unwrap();
    assert_eq!(history.total, 1);
}

#[tokio::test]
async fn a_finding_whose_stored_type_cannot_be_read_fails_alone() {
    let db = TestDb::new().await;
    let (store, clock) = db.store_with_clock();
    let (scope, key, _) = setup(&store, "A").await;
    // The column has no CHECK: a value written around the ingest's validation.
    db.execute("UPDATE findings SET finding_type = 'Not A Type' WHERE id = 'f2'")
        .await;
    // Reading it is an internal error whose cause (what the ERROR line logs) names it.
    let read = store.get_finding(scope, &id("f2")).await.unwrap_err();
    let cause = std::error::Error::source(&read).map(ToString::to_string);
    let cause = cause.unwrap_or_default();
    assert!(cause.contains("finding type"), "{cause}");
    assert!(cause.contains("Not A Type"), "{cause}");
    // A triage finds no finding it can read there, as for an unknown id...
    let now = clock.now();
    let single = store
        .triage_finding(scope, &id("f2"), &dismiss(now, None), key, None)
        .await;
    assert!(matches!(single, Err(Error::NotFound)), "{single:?}");
    // ...and a bulk triage says so of that item alone, triaging the other.
    let items = [(id("f1"), None), (id("f2"), None)];
    let bulk = store
        .triage_findings(scope, &items, &dismiss(now, None), key)
        .await
        .unwrap();
    assert!(
        matches!(&bulk.outcomes[0].1, BulkOutcome::Triaged(f) if f.triage.state == TriageState::Dismissed),
        "{:?}",
        bulk.outcomes
    );
    assert_eq!(bulk.outcomes[1].1, BulkOutcome::NotFound);
}

#[tokio::test]
async fn another_customers_finding_is_not_found_and_untouched() {
    let db = TestDb::new().await;
    let (store, clock) = db.store_with_clock();
    let (a, key_a, _) = setup(&store, "A").await;
    let (b, _, _) = setup(&store, "B").await;
    let _ = a;
    let foreign = store
        .triage_finding(b, &id("nope"), &dismiss(clock.now(), None), key_a, None)
        .await;
    assert!(matches!(foreign, Err(Error::NotFound)));
    assert!(matches!(
        store
            .triage_history(b, &id("nope"), PageRequest::new(Some(10), None).unwrap())
            .await,
        Err(Error::NotFound)
    ));
}

#[tokio::test]
async fn an_expired_mark_reads_untriaged_at_once_in_reads_and_filters() {
    let db = TestDb::new().await;
    let (store, clock) = db.store_with_clock();
    let (scope, key, _) = setup(&store, "A").await;
    store
        .triage_finding(scope, &id("f1"), &dismiss(clock.now(), Some(1)), key, None)
        .await
        .unwrap();
    let dismissed = FindingFilter {
        triage_states: vec![TriageState::Dismissed],
        ..FindingFilter::default()
    };
    let untriaged = FindingFilter {
        triage_states: vec![TriageState::Untriaged],
        ..FindingFilter::default()
    };
    let ids = |page: posture_domain::Page<posture_domain::finding::Finding>| {
        (
            page.items
                .iter()
                .map(|f| f.id.as_str().to_owned())
                .collect::<Vec<_>>(),
            page.total,
        )
    };
    let list = |filter| {
        let store = store.clone();
        async move {
            ids(store
                .list_findings(scope, &filter, PageRequest::new(Some(50), None).unwrap())
                .await
                .unwrap())
        }
    };
    assert_eq!(list(dismissed.clone()).await, (vec!["f1".to_owned()], 1));
    assert_eq!(list(untriaged.clone()).await, (vec!["f2".to_owned()], 1));
    let tag = store.get_finding(scope, &id("f1")).await.unwrap().tag();
    clock.advance(StdDuration::from_secs(86_400));
    let expired = store.get_finding(scope, &id("f1")).await.unwrap();
    assert_eq!(expired.triage.state, TriageState::Untriaged);
    assert_ne!(expired.tag(), tag, "an expiry changes the representation");
    assert_eq!(list(dismissed).await, (vec![], 0));
    assert_eq!(list(untriaged).await.1, 2);
}

#[tokio::test]
async fn a_triage_reaches_a_sync_by_modification() {
    let db = TestDb::new().await;
    let (store, clock) = db.store_with_clock();
    let (scope, key, _) = setup(&store, "A").await;
    let synced = store
        .list_findings(
            scope,
            &FindingFilter::default(),
            PageRequest::new(Some(50), None)
                .unwrap()
                .ordered(ListOrder::Modified { through: None }),
        )
        .await
        .unwrap();
    let through = synced.synced_through.unwrap();
    store
        .triage_finding(scope, &id("f2"), &dismiss(clock.now(), None), key, None)
        .await
        .unwrap();
    let since = store
        .list_findings(
            scope,
            &FindingFilter {
                modified_since: Some(through),
                ..FindingFilter::default()
            },
            PageRequest::new(Some(50), None)
                .unwrap()
                .ordered(ListOrder::Modified { through: None }),
        )
        .await
        .unwrap();
    let changed: Vec<_> = since.items.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(changed, ["f2"]);
    assert_eq!(since.items[0].triage.state, TriageState::Dismissed);
    assert!(since.synced_through.unwrap() >= since.items[0].modified_at);
}

/// `(type, finding, change as "from>to")` of the customer's events of these types.
async fn triage_events(
    store: &posture_store_postgres::PgStore,
    scope: posture_domain::CustomerScope,
) -> Vec<(String, String, String)> {
    use posture_domain::{event::EventFilter, ports::EventRepository, webhook::EventType};
    let filter = EventFilter {
        limit: 500,
        types: vec![EventType::FindingTriaged, EventType::FindingTriageExpired],
        ..EventFilter::default()
    };
    let page = store.list_events(scope, &filter).await.unwrap();
    page.events
        .into_iter()
        .map(|e| {
            let change = e.change.expect("a triage event has its change");
            assert_eq!(change.field.as_str(), "triageState");
            (
                e.event_type.as_str().to_owned(),
                e.finding.id.as_str().to_owned(),
                format!("{}>{}", change.from, change.to),
            )
        })
        .collect()
}

/// How many deliveries of `event_type` the customer's subscriptions have queued.
async fn queued(db: &TestDb, event_type: &str) -> i64 {
    db.count(&format!(
        "SELECT count(*) AS n FROM webhook_deliveries WHERE event_type = '{event_type}'"
    ))
    .await
}

#[tokio::test]
async fn a_triage_and_its_expiry_are_events_delivered_to_subscribers() {
    let db = TestDb::new().await;
    let (store, clock) = db.store_with_clock();
    let (scope, key, _) = setup(&store, "A").await;
    let (other, other_key, _) = setup(&store, "B").await;
    let keyring = posture_domain::secrets::Keyring::new(&[7; 32], &[]).unwrap();
    fixtures::subscription(
        &store,
        &keyring,
        scope,
        "http://127.0.0.1:9/hook",
        "generic",
        &["finding_triaged", "finding_triage_expired"],
    )
    .await;
    store
        .triage_finding(scope, &id("f1"), &dismiss(clock.now(), Some(1)), key, None)
        .await
        .unwrap();
    let ack = TriageChange::new(TriageState::Acknowledged, None, None, None, clock.now()).unwrap();
    store
        .triage_finding(scope, &id("f2"), &ack, key, None)
        .await
        .unwrap();
    store
        .triage_finding(
            other,
            &id("f1"),
            &dismiss(clock.now(), Some(1)),
            other_key,
            None,
        )
        .await
        .unwrap();
    // One delivery per write: two writes are two deliveries, not one swallowed by the other.
    assert_eq!(queued(&db, "finding_triaged").await, 2);
    assert_eq!(
        triage_events(&store, scope).await,
        [
            (
                "finding_triaged".into(),
                "f1".into(),
                "untriaged>dismissed".into()
            ),
            (
                "finding_triaged".into(),
                "f2".into(),
                "untriaged>acknowledged".into()
            ),
        ]
    );

    // Nothing has expired yet: the sweep records nothing.
    assert_eq!(store.expire_triage(500).await.unwrap(), 0);
    clock.advance(StdDuration::from_secs(86_400));
    let synced_before = store
        .get_finding(scope, &id("f1"))
        .await
        .unwrap()
        .modified_at;
    // Both customers' marks, in rounds of one.
    assert_eq!(store.expire_triage(1).await.unwrap(), 1);
    assert_eq!(store.expire_triage(500).await.unwrap(), 1);
    assert_eq!(store.expire_triage(500).await.unwrap(), 0, "recorded once");
    let events = triage_events(&store, scope).await;
    assert_eq!(
        events.last().unwrap(),
        &(
            "finding_triage_expired".into(),
            "f1".into(),
            "dismissed>untriaged".into()
        )
    );
    assert_eq!(events.len(), 3, "the acknowledged f2 had no expiry");
    assert_eq!(queued(&db, "finding_triage_expired").await, 1);
    let f1 = store.get_finding(scope, &id("f1")).await.unwrap();
    assert_eq!(f1.triage.state, TriageState::Untriaged);
    assert!(f1.triage.updated_by.is_none() && f1.triage.expires_at.is_none());
    let expiry = history_expiry(&store, scope).await;
    assert_eq!(
        f1.triage.updated_at,
        Some(expiry),
        "updated when it expired, as read before"
    );
    assert!(
        f1.modified_at > synced_before,
        "the sweep is a change a sync carries"
    );
    let history = store
        .triage_history(scope, &id("f1"), PageRequest::new(Some(10), None).unwrap())
        .await
        .unwrap();
    let newest = &history.items[0];
    assert_eq!(newest.at, expiry);
    assert_eq!(
        (newest.from, newest.to, newest.by.is_none()),
        (TriageState::Dismissed, TriageState::Untriaged, true),
        "the expiry is recorded without a key"
    );
    assert_eq!(history.items.len(), 2);
    // B's mark expired too, in B's feed only.
    assert_eq!(triage_events(&store, other).await.len(), 2);
}

/// When f1's first mark was to expire (its first history record's `expiresAt`).
async fn history_expiry(
    store: &posture_store_postgres::PgStore,
    scope: posture_domain::CustomerScope,
) -> chrono::DateTime<chrono::Utc> {
    let history = store
        .triage_history(scope, &id("f1"), PageRequest::new(Some(10), None).unwrap())
        .await
        .unwrap();
    history.items.last().unwrap().expires_at.unwrap()
}

#[tokio::test]
async fn a_customer_busy_with_a_pass_does_not_hold_the_sweep_of_the_others() {
    use diesel_async::{AsyncConnection as _, RunQueryDsl as _};
    let db = TestDb::new().await;
    let (store, clock) = db.store_with_clock();
    let (a, a_key, _) = setup(&store, "A").await;
    let (b, b_key, _) = setup(&store, "B").await;
    for (scope, key) in [(a, a_key), (b, b_key)] {
        store
            .triage_finding(scope, &id("f1"), &dismiss(clock.now(), Some(1)), key, None)
            .await
            .unwrap();
    }
    clock.advance(StdDuration::from_secs(86_400));
    // A pass of A's holds A's sync lock past the sweep's wait.
    let mut pass = db.connection().await;
    pass.begin_test_transaction().await.unwrap();
    diesel::sql_query(format!(
        "SELECT 1 FROM customer_sync WHERE customer_id = '{}' FOR UPDATE",
        a.customer_id()
    ))
    .execute(&mut pass)
    .await
    .unwrap();
    assert_eq!(store.expire_triage(500).await.unwrap(), 1, "B's, not A's");
    let read = |scope| {
        let store = &store;
        async move {
            store
                .triage_history(scope, &id("f1"), PageRequest::new(Some(10), None).unwrap())
                .await
                .unwrap()
                .items
                .len()
        }
    };
    assert_eq!((read(a).await, read(b).await), (1, 2));
    drop(pass);
    assert_eq!(store.expire_triage(500).await.unwrap(), 1, "A's, once free");
    assert_eq!(read(a).await, 2);
}
