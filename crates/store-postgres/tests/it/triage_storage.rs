//! Triage in storage: a write's comment kept once for all its findings, and a finding's
//! history kept to its newest records, the comments going with the last record that names
//! them.

use posture_domain::{
    PageRequest,
    clock::Clock as _,
    ports::FindingRepository,
    triage::{TriageChange, TriageReason, TriageState},
};
use posture_test_support::TestDb;

use crate::triage::{id, setup};

/// A bulk's comment is kept once for all its findings, and every read shows it: the
/// findings, their history, the events feed.
#[tokio::test]
async fn a_writes_comment_is_kept_once_and_read_wherever_it_shows() {
    use posture_domain::{event::EventFilter, ports::EventRepository};
    let db = TestDb::new().await;
    let (store, clock) = db.store_with_clock();
    let (scope, key, _) = setup(&store, "A").await;
    let comment = "𝒜".repeat(2_000);
    let change = TriageChange::new(
        TriageState::RiskAccepted,
        Some(TriageReason::CompensatingControl),
        Some(comment.clone()),
        None,
        clock.now(),
    )
    .unwrap();
    let items = vec![(id("f1"), None), (id("f2"), None)];
    store
        .triage_findings(scope, &items, &change, key)
        .await
        .unwrap();
    assert_eq!(
        db.count("SELECT count(*) AS n FROM triage_changes").await,
        1
    );
    assert_eq!(
        db.count(
            "SELECT count(*) AS n FROM findings \
             WHERE triage_comment IS NOT NULL OR triage_change_id IS NULL"
        )
        .await,
        0,
        "the findings name the change instead of keeping a copy"
    );
    for finding in ["f1", "f2"] {
        let read = store.get_finding(scope, &id(finding)).await.unwrap();
        assert_eq!(read.triage.comment.as_deref(), Some(comment.as_str()));
        let history = store
            .triage_history(scope, &id(finding), PageRequest::default())
            .await
            .unwrap();
        assert_eq!(history.items[0].comment.as_deref(), Some(comment.as_str()));
    }
    let filter = EventFilter {
        limit: 500,
        ..EventFilter::default()
    };
    let events = store.list_events(scope, &filter).await.unwrap();
    let triaged: Vec<_> = events
        .events
        .iter()
        .filter(|e| e.event_type.as_str() == "finding_triaged")
        .collect();
    assert_eq!(triaged.len(), 2);
    assert!(
        triaged
            .iter()
            .all(|e| e.finding.triage.comment.as_deref() == Some(comment.as_str()))
    );
    // A mark written before comments were kept once keeps its own, and reads as before.
    db.execute(
        "UPDATE findings SET triage_change_id = NULL, triage_comment = 'kept before' \
         WHERE id = 'f2'",
    )
    .await;
    let older = store.get_finding(scope, &id("f2")).await.unwrap();
    assert_eq!(older.triage.comment.as_deref(), Some("kept before"));
}

/// A finding keeps its newest 100 history records; a comment no finding and no record names
/// any more goes with the last record that named it.
#[tokio::test]
async fn a_findings_history_keeps_its_newest_records_and_their_comments() {
    let db = TestDb::new().await;
    let (store, clock) = db.store_with_clock();
    let (scope, key, _) = setup(&store, "A").await;
    let mark = |state, comment: &str| {
        TriageChange::new(state, None, Some(comment.to_owned()), None, clock.now()).unwrap()
    };
    // The first write marks both findings: its comment stays while f2 names it.
    let both = vec![(id("f1"), None), (id("f2"), None)];
    store
        .triage_findings(scope, &both, &mark(TriageState::Acknowledged, "first"), key)
        .await
        .unwrap();
    for n in 0..105 {
        let state = if n % 2 == 0 {
            TriageState::Acknowledged
        } else {
            TriageState::Dismissed
        };
        let change = if state == TriageState::Dismissed {
            TriageChange::new(
                state,
                Some(TriageReason::Duplicate),
                Some(format!("write {n}")),
                None,
                clock.now(),
            )
            .unwrap()
        } else {
            mark(state, &format!("write {n}"))
        };
        store
            .triage_finding(scope, &id("f1"), &change, key, None)
            .await
            .unwrap();
    }
    let history = store
        .triage_history(scope, &id("f1"), PageRequest::new(Some(500), None).unwrap())
        .await
        .unwrap();
    assert_eq!(history.total, 100, "the newest 100 of 106");
    assert_eq!(history.items[0].comment.as_deref(), Some("write 104"));
    assert_eq!(history.items[99].comment.as_deref(), Some("write 5"));
    assert_eq!(
        db.count("SELECT count(*) AS n FROM finding_triage_history WHERE finding_id = 'f1'")
            .await,
        100
    );
    assert_eq!(
        db.count("SELECT count(*) AS n FROM triage_changes").await,
        101,
        "the 100 f1's records name, and the first, which f2 still names"
    );
    let f2 = store.get_finding(scope, &id("f2")).await.unwrap();
    assert_eq!(f2.triage.comment.as_deref(), Some("first"));
}
