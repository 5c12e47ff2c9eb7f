//! Analyzer passes: every record kind stored, idempotent re-ingest, new findings, and a bad
//! line rejecting the whole pass with nothing changed.

use posture_domain::{
    PageRequest, identity::IdentityFilter, ingest::IngestError, ports::IdentityRepository,
};
use posture_test_support::{
    TestDb,
    fixtures::{
        self, customer, finding, identity, ingest, lines, recommendation, tenant, upr_score,
    },
};

fn sample(t: &str) -> String {
    lines(&[
        tenant(t, "Contoso"),
        identity("u1", t, "Ada"),
        identity("u2", t, "Grace"),
        finding("f1", t, "critical", "open", "u1"),
        finding("f2", t, "high", "open", "u2"),
        recommendation("r1", t, "u1"),
        upr_score("u1", t, 81, "2026-11-20T10:00:00Z"),
    ])
}

#[tokio::test]
async fn a_pass_stores_every_record_kind_and_counts_them() {
    let db = TestDb::new().await;
    let store = db.store();
    let scope = customer(&store, "A").await;
    let summary = ingest(&store, scope, &sample(&fixtures::tenant_id()))
        .await
        .unwrap();
    let c = &summary.counts;
    assert_eq!(
        (c.tenants, c.identities, c.findings, c.new_findings),
        (1, 2, 2, 2)
    );
    assert_eq!((c.role_recommendations, c.upr_scores), (1, 1));
    let counts = db.row_counts().await;
    let count = |t: &str| counts.iter().find(|(n, _)| *n == t).unwrap().1;
    assert_eq!(count("analyzer_passes"), 1);
    assert_eq!(count("role_assignments"), 2);
    assert_eq!(count("upr_latest"), 1);
}

#[tokio::test]
async fn reingesting_the_same_file_is_idempotent() {
    let db = TestDb::new().await;
    let store = db.store();
    let scope = customer(&store, "A").await;
    let file = sample(&fixtures::tenant_id());
    ingest(&store, scope, &file).await.unwrap();
    let before: Vec<_> = db
        .row_counts()
        .await
        .into_iter()
        .filter(|(t, _)| *t != "analyzer_passes")
        .collect();
    let again = ingest(&store, scope, &file).await.unwrap();
    let after: Vec<_> = db
        .row_counts()
        .await
        .into_iter()
        .filter(|(t, _)| *t != "analyzer_passes")
        .collect();
    assert_eq!(before, after);
    assert_eq!(
        again.counts.new_findings, 0,
        "findings seen before are not new"
    );
}

#[tokio::test]
async fn new_findings_are_those_first_reported_by_the_pass() {
    let db = TestDb::new().await;
    let store = db.store();
    let scope = customer(&store, "A").await;
    let t = fixtures::tenant_id();
    ingest(&store, scope, &sample(&t)).await.unwrap();
    let second = lines(&[
        finding("f2", &t, "high", "resolved", "u2"),
        finding("f3", &t, "low", "open", "u2"),
    ]);
    assert_eq!(
        ingest(&store, scope, &second)
            .await
            .unwrap()
            .counts
            .new_findings,
        1
    );
}

#[tokio::test]
async fn the_last_line_wins_for_an_id_given_twice_in_one_pass() {
    let db = TestDb::new().await;
    let store = db.store();
    let scope = customer(&store, "A").await;
    let t = fixtures::tenant_id();
    let file = lines(&[
        tenant(&t, "Contoso"),
        identity("u1", &t, "First"),
        identity("u1", &t, "Second"),
    ]);
    ingest(&store, scope, &file).await.unwrap();
    let page = store
        .list_identities(scope, &IdentityFilter::default(), PageRequest::default())
        .await
        .unwrap();
    assert_eq!(page.total, 1);
    assert_eq!(page.items[0].display_name, "Second");
}

/// A pass with a bad line must keep nothing, and say which line.
async fn assert_rejected_at(bad: serde_json::Value, expected_line: u64, reason_part: &str) {
    let db = TestDb::new().await;
    let store = db.store();
    let scope = customer(&store, "A").await;
    let t = fixtures::tenant_id();
    ingest(&store, scope, &sample(&t)).await.unwrap();
    let before = db.row_counts().await;

    let mut records = vec![
        identity("u3", &t, "Linus"),
        finding("f9", &t, "medium", "open", "u3"),
    ];
    records.push(bad);
    records.push(finding("f10", &t, "low", "open", "u3"));
    let err = ingest(&store, scope, &lines(&records)).await.unwrap_err();
    match &err {
        IngestError::Line { line, reason } => {
            assert_eq!(*line, expected_line, "{err}");
            assert!(
                reason.contains(reason_part),
                "{reason:?} should mention {reason_part:?}"
            );
        }
        other => panic!("expected a line error, got {other:?}"),
    }
    assert_eq!(
        db.row_counts().await,
        before,
        "a failed pass changes nothing"
    );
}

#[tokio::test]
async fn a_line_of_unknown_type_rejects_the_whole_pass() {
    assert_rejected_at(serde_json::json!({"type": "alert", "id": "a1"}), 3, "alert").await;
}

#[tokio::test]
async fn a_line_without_id_rejects_the_whole_pass() {
    let t = fixtures::tenant_id();
    let mut bad = finding("x", &t, "low", "open", "u1");
    bad.as_object_mut().unwrap().remove("id");
    assert_rejected_at(bad, 3, "missing field `id`").await;
}

#[tokio::test]
async fn a_line_with_a_wrong_severity_rejects_the_whole_pass() {
    let mut bad = finding("x", &fixtures::tenant_id(), "low", "open", "u1");
    bad["severity"] = "urgent".into();
    assert_rejected_at(bad, 3, "urgent").await;
}

#[tokio::test]
async fn a_line_of_a_tenant_not_connected_rejects_the_whole_pass() {
    let other = fixtures::tenant_id();
    assert_rejected_at(
        finding("x", &other, "low", "open", "u1"),
        3,
        "not connected",
    )
    .await;
}

#[tokio::test]
async fn a_reference_to_an_unknown_identity_rejects_the_whole_pass() {
    // The lines before and after are valid; the finding names an identity never ingested.
    let db = TestDb::new().await;
    let store = db.store();
    let scope = customer(&store, "A").await;
    let t = fixtures::tenant_id();
    let file = lines(&[
        tenant(&t, "Contoso"),
        identity("u1", &t, "Ada"),
        finding("f1", &t, "low", "open", "ghost"),
    ]);
    let err = ingest(&store, scope, &file).await.unwrap_err();
    assert!(
        matches!(&err, IngestError::Line { line: 3, reason } if reason.contains("ghost")),
        "{err}"
    );
    assert!(
        db.row_counts()
            .await
            .iter()
            .filter(|(t, _)| *t != "customers")
            .all(|(_, n)| *n == 0)
    );
}

#[tokio::test]
async fn a_tenant_record_of_another_customers_tenant_rejects_the_pass() {
    let db = TestDb::new().await;
    let store = db.store();
    let a = customer(&store, "A").await;
    let b = customer(&store, "B").await;
    let t = fixtures::tenant_id();
    ingest(&store, a, &lines(&[tenant(&t, "Contoso")]))
        .await
        .unwrap();
    let err = ingest(&store, b, &lines(&[tenant(&t, "Contoso")]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, IngestError::Line { line: 1, reason } if reason.contains("another customer")),
        "{err}"
    );
}

#[tokio::test]
async fn recent_passes_count_every_customers_passes_within_the_window_and_time_them() {
    use diesel_async::RunQueryDsl as _;
    use posture_domain::ports::PassStatistics;
    let db = TestDb::new().await;
    let store = db.store();
    let none = store
        .recent_passes(std::time::Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!((none.count, none.since_last_secs), (0, None));
    for name in ["A", "B", "C"] {
        let scope = customer(&store, name).await;
        ingest(&store, scope, &sample(&fixtures::tenant_id()))
            .await
            .unwrap();
    }
    // One of them finished two hours ago: outside the hour (found first, then moved by its
    // key, as Citus updates one row of a distributed table).
    #[derive(diesel::QueryableByName)]
    struct First {
        #[diesel(sql_type = diesel::sql_types::Uuid)]
        customer_id: uuid::Uuid,
        #[diesel(sql_type = diesel::sql_types::Uuid)]
        id: uuid::Uuid,
        #[diesel(sql_type = diesel::sql_types::Timestamptz)]
        started_at: chrono::DateTime<chrono::Utc>,
        #[diesel(sql_type = diesel::sql_types::Timestamptz)]
        finished_at: chrono::DateTime<chrono::Utc>,
    }
    let mut owner = db.connection().await;
    let first: First = diesel::sql_query(
        "SELECT customer_id, id, started_at - interval '2 hours' AS started_at, \
                finished_at - interval '2 hours' AS finished_at \
         FROM analyzer_passes ORDER BY finished_at LIMIT 1",
    )
    .get_result(&mut owner)
    .await
    .unwrap();
    diesel::sql_query(
        "UPDATE analyzer_passes SET started_at = $3, finished_at = $4 \
         WHERE customer_id = $1 AND id = $2",
    )
    .bind::<diesel::sql_types::Uuid, _>(first.customer_id)
    .bind::<diesel::sql_types::Uuid, _>(first.id)
    .bind::<diesel::sql_types::Timestamptz, _>(first.started_at)
    .bind::<diesel::sql_types::Timestamptz, _>(first.finished_at)
    .execute(&mut owner)
    .await
    .unwrap();
    let recent = store
        .recent_passes(std::time::Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(recent.count, 2);
    assert!(recent.median_secs > 0.0, "{recent:?}");
    assert!(recent.median_secs <= recent.p99_secs, "{recent:?}");
    assert!(recent.p99_secs <= recent.longest_secs, "{recent:?}");
    assert!(recent.longest_secs < 60.0, "{recent:?}");
    let since = recent.since_last_secs.unwrap();
    assert!((0.0..60.0).contains(&since), "{recent:?}");
}
