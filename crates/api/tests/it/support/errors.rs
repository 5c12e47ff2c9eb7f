//! What every error answer holds: the `{error, reason?}` body, and on a 400 or 422 the value
//! refused (`field`) and how (`kind`).

use reqwest::{Response, StatusCode};
use serde_json::Value;

/// Asserts the `{error, reason?}` body with this code (and on a 400 or 422 a `kind` from the
/// documented set, with a `field` or without); returns the reason.
pub async fn assert_error(response: Response, status: StatusCode, code: &str) -> String {
    error_body(response, status, code).await.0
}

/// Asserts a 400 or 422 refusing `field` as `kind`; returns the reason.
pub async fn assert_refused(
    response: Response,
    status: StatusCode,
    field: &str,
    kind: posture_domain::Refusal,
) -> String {
    let code = match status {
        StatusCode::BAD_REQUEST => "invalid_request",
        _ => "unprocessable_entity",
    };
    let (reason, body) = error_body(response, status, code).await;
    assert_eq!(body["field"], field, "{body}");
    assert_eq!(body["kind"], kind.as_str(), "{body}");
    reason
}

async fn error_body(response: Response, status: StatusCode, code: &str) -> (String, Value) {
    assert_eq!(response.status(), status);
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json")
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"], code, "{body}");
    let refusal = matches!(status.as_u16(), 400 | 422);
    let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert!(
        keys.iter().all(|k| *k == "error"
            || *k == "reason"
            || (refusal && (*k == "field" || *k == "kind"))),
        "only error and reason (and on a 400 or 422 field and kind): {body}"
    );
    if refusal {
        let kind = body["kind"].as_str().unwrap_or_default();
        assert!(
            posture_domain::Refusal::ALL
                .iter()
                .any(|k| k.as_str() == kind),
            "a 400 or 422 says how it refused: {body}"
        );
        assert!(
            body["field"].is_null() || body["field"].is_string(),
            "{body}"
        );
    }
    let reason = body["reason"].as_str().unwrap_or_default().to_owned();
    (reason, body)
}
