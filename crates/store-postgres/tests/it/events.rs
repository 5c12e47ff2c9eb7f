//! The events feed's storage: one index (the primary key) serves the feed's order, its
//! `createdSince`, a pass's own events and the retention sweep (migration 000016).

use chrono::{Duration, Utc};
use posture_domain::{event::EventFilter, ports::EventRepository};
use posture_test_support::{
    TestDb,
    fixtures::{self, customer, finding, identity, ingest, lines, tenant},
};

/// A customer whose first pass found one finding (`f1`): one event.
async fn with_one_finding(
    store: &posture_store_postgres::PgStore,
    name: &str,
) -> posture_domain::CustomerScope {
    let scope = customer(store, name).await;
    let t = fixtures::tenant_id();
    ingest(
        store,
        scope,
        &lines(&[
            tenant(&t, "Contoso"),
            identity("u1", &t, "Ada"),
            finding("f1", &t, "high", "open", "u1"),
        ]),
    )
    .await
    .unwrap();
    scope
}

/// Events of `customer` written by SQL, numbered after its last, created `days_ago`.
async fn old_events(db: &TestDb, customer: uuid::Uuid, count: i64, days_ago: i64) {
    db.execute(&format!(
        "INSERT INTO finding_events (customer_id, id, seq, event_type, pass_id, finding_id, \
             change, created_at) \
         SELECT '{customer}', posture_event_id(t, g), g, 'finding_high', gen_random_uuid(), \
             'f1', NULL, t \
         FROM (SELECT g, now() - interval '{days_ago} days' + g * interval '1 ms' AS t \
               FROM generate_series((SELECT coalesce(max(seq), 0) + 1 FROM finding_events \
                                     WHERE customer_id = '{customer}'), \
                                    (SELECT coalesce(max(seq), 0) + {count} FROM finding_events \
                                     WHERE customer_id = '{customer}')) g) s"
    ))
    .await;
}

/// Every event, a page.
fn every() -> EventFilter {
    EventFilter {
        limit: 500,
        ..EventFilter::default()
    }
}

async fn count(db: &TestDb, customer: uuid::Uuid) -> i64 {
    use diesel_async::RunQueryDsl as _;

    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = db.connection().await;
    diesel::sql_query(format!(
        "SELECT count(*) AS n FROM finding_events WHERE customer_id = '{customer}'"
    ))
    .get_result::<Count>(&mut conn)
    .await
    .unwrap()
    .n
}

#[tokio::test]
async fn retention_deletes_only_events_past_the_cutoff_of_every_customer_in_batches() {
    let db = TestDb::new().await;
    let store = db.store();
    let a = with_one_finding(&store, "A").await;
    let b = with_one_finding(&store, "B").await;
    // A has 5 events of 40 days ago before its pass's; B 3 (numbered after its pass's: the
    // sweep goes by time, not by number).
    old_events(&db, a.customer_id().as_uuid(), 5, 40).await;
    old_events(&db, b.customer_id().as_uuid(), 3, 40).await;
    assert_eq!(count(&db, a.customer_id().as_uuid()).await, 6);

    let cutoff = Utc::now() - Duration::days(30);
    let mut swept = Vec::new();
    loop {
        let n = store.purge_events(cutoff, 3).await.unwrap();
        if n == 0 {
            break;
        }
        assert!(n <= 3, "a batch is bounded");
        swept.push(n);
    }
    assert_eq!(swept.iter().sum::<u64>(), 8, "{swept:?}");
    for scope in [a, b] {
        assert_eq!(count(&db, scope.customer_id().as_uuid()).await, 1);
        let page = store.list_events(scope, &every()).await.unwrap();
        assert_eq!(page.events.len(), 1, "the pass's own event stays");
    }
}

#[tokio::test]
async fn created_since_starts_at_the_first_event_created_then_whatever_its_millisecond() {
    let db = TestDb::new().await;
    let store = db.store();
    let scope = with_one_finding(&store, "A").await;
    let id = scope.customer_id().as_uuid();
    // Ten events a millisecond apart, 2 days ago, after the pass's event.
    db.execute(&format!(
        "INSERT INTO finding_events (customer_id, id, seq, event_type, pass_id, finding_id, \
             change, created_at) \
         SELECT '{id}', posture_event_id(t, g), g, 'finding_high', gen_random_uuid(), 'f1', \
             NULL, t \
         FROM (SELECT g, now() + interval '1 day' + g * interval '1 ms' \
                         + interval '400 microseconds' AS t \
               FROM generate_series(2, 11) g) s"
    ))
    .await;
    let all = store.list_events(scope, &every()).await.unwrap();
    assert_eq!(all.events.len(), 11);
    let ids: Vec<_> = all.events.iter().map(|e| e.id).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted);
    // From the 6th event's time, to the microsecond: its millisecond's floor would also
    // take nothing earlier, and an exact time takes it.
    let since = all.events[5].created_at;
    let from = store
        .list_events(
            scope,
            &EventFilter {
                created_since: Some(since),
                ..every()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        from.events.iter().map(|e| e.id).collect::<Vec<_>>(),
        ids[5..]
    );
    let just_after = store
        .list_events(
            scope,
            &EventFilter {
                created_since: Some(since + Duration::microseconds(1)),
                ..every()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        just_after.events.iter().map(|e| e.id).collect::<Vec<_>>(),
        ids[6..],
        "an event of the same millisecond but earlier is left out"
    );
}

/// During a rolling upgrade a newer ingest may write an event of a type this build does not
/// know (its migration widened the check first): the feed serves what it knows instead of
/// failing the page, and the unknown event reads as absent.
#[tokio::test]
async fn an_event_of_a_type_from_a_newer_build_is_skipped_not_an_error() {
    let db = TestDb::new().await;
    let store = db.store();
    let scope = with_one_finding(&store, "A").await;
    let customer = scope.customer_id().as_uuid();
    db.execute("ALTER TABLE finding_events DROP CONSTRAINT finding_events_event_type_check")
        .await;
    old_events(&db, customer, 1, 0).await;
    db.execute(&format!(
        "UPDATE finding_events SET event_type = 'finding_from_a_newer_build' \
         WHERE customer_id = '{customer}' AND seq = (SELECT max(seq) FROM finding_events \
                                                     WHERE customer_id = '{customer}')"
    ))
    .await;
    let page = store.list_events(scope, &every()).await.unwrap();
    assert_eq!(page.events.len(), 1, "the known event only");
    assert_eq!(count(&db, customer).await, 2);
    let all = store
        .list_events(
            scope,
            &EventFilter {
                limit: 500,
                after: Some(page.events[0].id),
                ..EventFilter::default()
            },
        )
        .await
        .unwrap();
    assert!(all.events.is_empty() && !all.has_more);
}
