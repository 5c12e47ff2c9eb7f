//! `GET /api/v1/findings/export`: NDJSON and CEF, streamed.

use std::collections::BTreeSet;

use posture_domain::Scope;
use posture_test_support::{
    cef,
    fixtures::{finding, identity, tenant, tenant_id},
};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestApp, assert_error};

/// A with `n` findings over two tenants (severities and statuses rotating), B with one.
async fn dataset(app: &TestApp, n: usize) -> (String, String, [String; 2]) {
    let (a, t1) = app.customer("A").await;
    let t2 = tenant_id();
    let severities = ["critical", "high", "medium", "low"];
    let statuses = ["open", "resolved", "suppressed"];
    let mut records = vec![
        tenant(&t2, "A2"),
        identity("u1", &t1, "Ada"),
        identity("u2", &t2, "Grace"),
    ];
    for i in 0..n {
        let (t, u) = if i % 2 == 0 { (&t1, "u1") } else { (&t2, "u2") };
        records.push(finding(
            &format!("f-{i:05}"),
            t,
            severities[i % 4],
            statuses[i % 3],
            u,
        ));
    }
    app.ingest(a, &records).await;
    let (b, tb) = app.customer("B").await;
    app.ingest(
        b,
        &[
            identity("x", &tb, "B"),
            finding("b-secret", &tb, "critical", "open", "x"),
        ],
    )
    .await;
    let (_, key_a) = app.key(a, &[Scope::ReadFindings]).await;
    let (_, key_b) = app.key(b, &[Scope::ReadFindings]).await;
    (key_a, key_b, [t1, t2])
}

async fn export(app: &TestApp, key: &str, query: &str) -> (reqwest::header::HeaderMap, String) {
    let response = app
        .get(&format!("/api/v1/findings/export{query}"), key)
        .await;
    assert_eq!(response.status(), StatusCode::OK, "{query}");
    let headers = response.headers().clone();
    (headers, response.text().await.unwrap())
}

#[tokio::test]
async fn ndjson_has_one_parsable_line_per_finding_and_the_count_matches() {
    let app = TestApp::start().await;
    let (key, _, _) = dataset(&app, 2500).await;
    let (headers, body) = export(&app, &key, "").await;
    assert_eq!(headers["content-type"], "application/x-ndjson");
    assert!(
        headers["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment; filename=\"findings-")
    );
    assert!(
        headers["content-disposition"]
            .to_str()
            .unwrap()
            .ends_with(".ndjson\"")
    );
    assert!(
        body.ends_with('\n'),
        "the last line ends in a line feed too"
    );
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.len(), 2500);
    assert_eq!(headers["x-total-count"], "2500");
    let ids: Vec<String> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "ordered by id, across pages");
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        2500,
        "each finding once"
    );
    assert!(!body.contains("b-secret"), "no other customer's finding");
}

#[tokio::test]
async fn a_line_has_the_shape_of_the_list_route() {
    let app = TestApp::start().await;
    let (key, _, _) = dataset(&app, 3).await;
    let (_, body) = export(&app, &key, "").await;
    let first: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    let listed = app
        .get_json("/api/v1/findings/f-00000", &key, StatusCode::OK)
        .await;
    assert_eq!(first, listed["data"]);
}

#[tokio::test]
async fn the_filters_of_findings_apply_and_match_x_total_count() {
    let app = TestApp::start().await;
    let (key, _, [t1, _]) = dataset(&app, 240).await;
    let (headers, body) = export(
        &app,
        &key,
        &format!("?severity=critical,high&status=open&tenant={t1}"),
    )
    .await;
    let rows: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!rows.is_empty());
    assert_eq!(
        headers["x-total-count"].to_str().unwrap(),
        rows.len().to_string()
    );
    for row in &rows {
        assert!(
            matches!(row["severity"].as_str(), Some("critical" | "high")),
            "{row}"
        );
        assert_eq!(row["status"], "open");
        assert_eq!(row["cloudTenantId"], t1.as_str());
    }
    let list = app
        .get_json(
            &format!("/api/v1/findings?severity=critical,high&status=open&tenant={t1}"),
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(list["meta"]["total"], rows.len());
}

#[tokio::test]
async fn an_empty_export_is_an_empty_200_body() {
    let app = TestApp::start().await;
    let (key, _, _) = dataset(&app, 10).await;
    let (headers, body) = export(&app, &key, "?findingType=legacy_authentication").await;
    assert_eq!(body, "");
    assert_eq!(headers["x-total-count"], "0");
    let (_, cef) = export(&app, &key, "?format=cef&findingType=legacy_authentication").await;
    assert_eq!(cef, "");
}

#[tokio::test]
async fn a_foreign_tenant_unknown_values_and_paging_parameters_are_refused() {
    let app = TestApp::start().await;
    let (key, _, _) = dataset(&app, 1).await;
    let (b, tb) = app.customer("B2").await;
    let _ = b;
    assert_error(
        app.get(&format!("/api/v1/findings/export?tenant={tb}"), &key)
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    for (query, parameter) in [
        ("format=xml", "format"),
        ("severity=urgent", "severity"),
        ("limit=10", "limit"),
        ("offset=5", "offset"),
    ] {
        let reason = assert_error(
            app.get(&format!("/api/v1/findings/export?{query}"), &key)
                .await,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        )
        .await;
        assert!(reason.contains(parameter), "{query}: {reason}");
    }
    let reason = assert_error(
        app.get("/api/v1/findings/export?format=xml", &key).await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    )
    .await;
    assert!(reason.contains("ndjson, cef"), "{reason}");
}

#[tokio::test]
async fn cef_lines_have_seven_header_separators_and_map_severities_to_10_8_5_3() {
    let app = TestApp::start().await;
    let (key, _, _) = dataset(&app, 8).await;
    let (headers, body) = export(&app, &key, "?format=cef").await;
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert!(
        headers["content-disposition"]
            .to_str()
            .unwrap()
            .ends_with(".cef\"")
    );
    assert!(body.ends_with('\n'));
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.len(), 8);
    for line in &lines {
        let (header, ext) = cef::parse(line).unwrap_or_else(|| panic!("not CEF: {line}"));
        assert_eq!(header.len(), 7);
        assert_eq!(&header[..3], ["0", "Posture", "posture-api"]);
        let expected = match ext["cs3"].as_str() {
            "critical" => "10",
            "high" => "8",
            "medium" => "5",
            "low" => "3",
            other => panic!("severity {other}"),
        };
        assert_eq!(header[6], expected);
        assert!(ext["externalId"].starts_with("f-"));
        assert_eq!(ext["cs1Label"], "tenant");
    }
}

#[tokio::test]
async fn hostile_titles_and_descriptions_stay_on_one_cef_line_and_parse_back() {
    let app = TestApp::start().await;
    let (a, t) = app.customer("A").await;
    let title = "Admin|root\\path=x\r\nsecond\rthird\nfourth";
    let description = "a|b \\ c = d\r\ne\rf\ng";
    app.ingest(
        a,
        &[
            identity("u1", &t, "Ada"),
            json!({"type": "finding", "id": "h1", "cloudTenantId": t,
        "findingType": "tier0_permanent_root", "severity": "high", "title": title,
        "description": description, "identityId": "u1"}),
        ],
    )
    .await;
    let (_, key) = app.key(a, &[Scope::ReadFindings]).await;
    let (_, body) = export(&app, &key, "?format=cef").await;
    assert_eq!(body.matches('\n').count(), 1, "exactly one line: {body:?}");
    let (header, ext) = cef::parse(body.trim_end_matches('\n')).unwrap();
    assert_eq!(header[5], "Admin|root\\path=x second third fourth");
    assert_eq!(ext["cs4"], "Admin|root\\path=x\nsecond\nthird\nfourth");
    assert_eq!(ext["msg"], "a|b \\ c = d\ne\nf\ng");
    assert_eq!(ext["suser"], "Ada");
    assert_eq!(ext["duid"], "u1");
}

#[tokio::test]
async fn a_client_that_goes_away_ends_the_export_and_frees_its_connection() {
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let app = TestApp::start().await;
    let (key, _, _) = dataset(&app, 20_000).await;
    let conn = tokio::sync::Mutex::new(AsyncPgConnection::establish(app.db.url()).await.unwrap());
    let database = app.db.url().rsplit('/').next().unwrap().to_owned();
    // Connections of the test database inside a transaction reading findings (the export),
    // other than this one.
    let in_transaction = async || -> i64 {
        let open: Count = diesel::sql_query(
            "SELECT count(*) AS n FROM pg_stat_activity \
             WHERE datname = $1 AND xact_start IS NOT NULL AND pid <> pg_backend_pid() \
             AND query ILIKE '%findings%'",
        )
        .bind::<diesel::sql_types::Text, _>(&database)
        .get_result(&mut *conn.lock().await)
        .await
        .unwrap();
        open.n
    };
    let mut response = app.get("/api/v1/findings/export", &key).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.chunk().await.unwrap().is_some(),
        "the response starts before the export ends"
    );
    assert_eq!(
        in_transaction().await,
        1,
        "the export reads inside one snapshot"
    );
    drop(response);
    posture_test_support::waits::wait_for(
        "the export's transaction ending",
        std::time::Duration::from_secs(10),
        || async { (in_transaction().await == 0).then_some(()) },
    )
    .await;
    // And the service still answers.
    assert_eq!(
        app.get("/api/v1/findings?limit=1", &key).await.status(),
        StatusCode::OK
    );
}
