//! `GET /api/v1/upr`, `/upr/principals`, `/upr/trend`.

use chrono::{Duration, Utc};
use posture_domain::Scope;
use posture_test_support::fixtures::{identity, tenant, tenant_id, upr_score};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestApp, assert_error};

fn days_ago(days: i64) -> String {
    (Utc::now() - Duration::days(days))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Customer A: tenant t1 with principals scoring `scores` (latest today, an older score two
/// days ago), tenant t2 with one principal at 90. Customer B with one principal.
async fn scores(app: &TestApp, scores: &[u8]) -> (String, String, String) {
    let (a, t1) = app.customer("A").await;
    let t2 = tenant_id();
    let mut records = vec![
        tenant(&t2, "A2"),
        identity("p-t2", &t2, "Other tenant"),
        upr_score("p-t2", &t2, 90, &days_ago(0)),
    ];
    for (i, score) in scores.iter().enumerate() {
        let id = format!("p-{i}");
        records.push(identity(&id, &t1, &format!("Principal {i}")));
        // An older score that the rollup must ignore.
        records.push(upr_score(&id, &t1, 100 - *score, &days_ago(2)));
        records.push(upr_score(&id, &t1, *score, &days_ago(0)));
    }
    app.ingest(a, &records).await;
    let (b, tb) = app.customer("B").await;
    app.ingest(
        b,
        &[
            identity("x", &tb, "B"),
            upr_score("x", &tb, 10, &days_ago(0)),
        ],
    )
    .await;
    let (_, key) = app.key(a, &[Scope::ReadUpr]).await;
    (key, t1, t2)
}

const T1_SCORES: [u8; 8] = [95, 80, 79, 60, 59, 40, 39, 0];

#[tokio::test]
async fn the_rollup_equals_figures_computed_by_hand_over_the_latest_scores() {
    let app = TestApp::start().await;
    let (key, t1, t2) = scores(&app, &T1_SCORES).await;
    // t1: 95 80 | 79 60 | 59 40 | 39 0; t2: 90.
    let body = app.get_json("/api/v1/upr", &key, StatusCode::OK).await;
    let data = &body["data"];
    assert_eq!(data["cloudTenantId"], Value::Null);
    assert_eq!(data["principalCount"], 9);
    let sum: u32 = T1_SCORES.iter().map(|s| u32::from(*s)).sum::<u32>() + 90;
    assert_eq!(
        data["meanScore"],
        json!(((f64::from(sum) / 9.0) * 10.0).round() / 10.0)
    );
    assert_eq!(
        data["bands"],
        json!({"critical": 3, "high": 2, "medium": 2, "low": 2})
    );
    assert!(data["computedAt"].is_string());
    let by_tenant = data["byTenant"].as_array().unwrap();
    assert_eq!(by_tenant.len(), 2);
    let t1_row = by_tenant
        .iter()
        .find(|r| r["cloudTenantId"] == t1.as_str())
        .unwrap();
    assert_eq!(t1_row["principalCount"], 8);
    assert_eq!(t1_row["meanScore"], json!(56.5));
    assert_eq!(
        t1_row["bands"],
        json!({"critical": 2, "high": 2, "medium": 2, "low": 2})
    );

    let only_t2 = app
        .get_json(&format!("/api/v1/upr?tenant={t2}"), &key, StatusCode::OK)
        .await;
    assert_eq!(only_t2["data"]["cloudTenantId"], t2.as_str());
    assert_eq!(only_t2["data"]["principalCount"], 1);
    assert_eq!(only_t2["data"]["meanScore"], json!(90.0));
}

#[tokio::test]
async fn principals_are_listed_highest_score_first_with_factors_and_min_score() {
    let app = TestApp::start().await;
    let (key, _, _) = scores(&app, &T1_SCORES).await;
    let body = app
        .get_json("/api/v1/upr/principals", &key, StatusCode::OK)
        .await;
    assert_eq!(body["meta"]["total"], 9);
    let listed: Vec<u64> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["score"].as_u64().unwrap())
        .collect();
    assert_eq!(listed, vec![95, 90, 80, 79, 60, 59, 40, 39, 0]);
    let top = &body["data"][0];
    assert_eq!(top["identity"]["id"], "p-0");
    assert_eq!(top["band"], "critical");
    assert_eq!(
        top["factors"],
        json!({"privilegeTier": 47, "unusedPermission": 48})
    );
    let high = app
        .get_json(
            "/api/v1/upr/principals?minScore=60&limit=2",
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(high["meta"]["total"], 5);
    assert_eq!(high["data"].as_array().unwrap().len(), 2);
    let reason = assert_error(
        app.get("/api/v1/upr/principals?minScore=101", &key).await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    )
    .await;
    assert!(reason.contains("minScore"));
}

#[tokio::test]
async fn the_trend_has_one_point_per_day_with_scores() {
    let app = TestApp::start().await;
    let (key, t1, _) = scores(&app, &[50, 70]).await;
    let body = app
        .get_json("/api/v1/upr/trend", &key, StatusCode::OK)
        .await;
    assert_eq!(body["meta"]["days"], 30);
    let points = body["data"].as_array().unwrap();
    let days: Vec<&str> = points.iter().map(|p| p["day"].as_str().unwrap()).collect();
    let today = Utc::now().date_naive();
    let two_days_ago = today - Duration::days(2);
    assert_eq!(
        days,
        vec![two_days_ago.to_string(), today.to_string()],
        "only days with scores"
    );
    // Two days ago: t1's principals scored 100-50 and 100-70.
    assert_eq!(points[0]["principalCount"], 2);
    assert_eq!(points[0]["meanScore"], json!(40.0));
    // Today: 50, 70 and t2's 90.
    assert_eq!(points[1]["principalCount"], 3);
    assert_eq!(points[1]["meanScore"], json!(70.0));
    assert_eq!(
        points[1]["bands"],
        json!({"critical": 1, "high": 1, "medium": 1, "low": 0})
    );

    let short = app
        .get_json(
            &format!("/api/v1/upr/trend?days=1&tenant={t1}"),
            &key,
            StatusCode::OK,
        )
        .await;
    assert_eq!(short["meta"]["days"], 1);
    assert_eq!(short["meta"]["tenant"], t1.as_str());
    assert_eq!(short["data"].as_array().unwrap().len(), 1);
    assert_eq!(short["data"][0]["principalCount"], 2);
}

#[tokio::test]
async fn trend_days_above_365_are_clamped_and_zero_is_400() {
    let app = TestApp::start().await;
    let (key, _, _) = scores(&app, &[50]).await;
    let body = app
        .get_json("/api/v1/upr/trend?days=1000", &key, StatusCode::OK)
        .await;
    assert_eq!(body["meta"]["days"], 365);
    let from =
        chrono::NaiveDate::parse_from_str(body["meta"]["from"].as_str().unwrap(), "%Y-%m-%d")
            .unwrap();
    let to = chrono::NaiveDate::parse_from_str(body["meta"]["to"].as_str().unwrap(), "%Y-%m-%d")
        .unwrap();
    assert_eq!((to - from).num_days(), 364);
    let reason = assert_error(
        app.get("/api/v1/upr/trend?days=0", &key).await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    )
    .await;
    assert!(reason.contains("days"));
}

#[tokio::test]
async fn a_customer_without_scores_gets_an_empty_rollup() {
    let app = TestApp::start().await;
    let (a, _) = app.customer("A").await;
    let (_, key) = app.key(a, &[Scope::ReadUpr]).await;
    let body = app.get_json("/api/v1/upr", &key, StatusCode::OK).await;
    assert_eq!(body["data"]["principalCount"], 0);
    assert_eq!(body["data"]["meanScore"], Value::Null);
    assert_eq!(body["data"]["latestScoreAt"], Value::Null);
}
