//! `posture whoami`: the key's customer, scopes and expiry (`GET /api/v1/keys/current`).

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use crate::client::{Api, ApiError};

/// What the CLI reads of `GET /keys/current`. Leniently: scopes are strings, and fields a
/// newer service adds are ignored here (`--json` prints the whole answer).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyInfo {
    pub name: String,
    pub prefix: String,
    pub scopes: Vec<String>,
    pub customer: Customer,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Customer {
    pub id: String,
    pub name: String,
}

/// The answer: the key as read, the document as sent, and the service's clock.
#[derive(Debug)]
pub struct Whoami {
    pub key: KeyInfo,
    pub raw: Value,
    /// The answer's `Date`: where `posture listen` starts without `--after`.
    pub server_time: Option<DateTime<Utc>>,
}

#[derive(Deserialize)]
struct Envelope {
    data: Value,
}

pub async fn fetch(api: &Api) -> Result<Whoami, ApiError> {
    let (envelope, headers): (Envelope, _) = api.get_json("keys/current", &[]).await?;
    let key = serde_json::from_value(envelope.data.clone())
        .map_err(|e| ApiError::Unexpected(format!("keys/current: {e}")))?;
    let server_time = headers
        .get(reqwest::header::DATE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| DateTime::parse_from_rfc2822(v).ok())
        .map(|t| t.with_timezone(&Utc));
    Ok(Whoami {
        key,
        raw: envelope.data,
        server_time,
    })
}

/// The text `posture whoami` prints.
pub fn render(key: &KeyInfo, now: DateTime<Utc>) -> String {
    let expires = match key.expires_at {
        None => "never".to_owned(),
        Some(at) if at <= now => format!("{} (expired)", stamp(at)),
        Some(at) => format!("{} (in {})", stamp(at), span(at - now)),
    };
    let last_used = key
        .last_used_at
        .map_or_else(|| "not recorded yet".to_owned(), stamp);
    format!(
        "key        {} ({}…)\ncustomer   {} ({})\nscopes     {}\nexpires    {expires}\nlast used  {last_used}\n",
        key.name,
        key.prefix,
        key.customer.name,
        key.customer.id,
        key.scopes.join(", "),
    )
}

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn span(left: chrono::TimeDelta) -> String {
    match (left.num_days(), left.num_hours(), left.num_minutes()) {
        (d, _, _) if d >= 2 => format!("{d} days"),
        (_, h, _) if h >= 2 => format!("{h} hours"),
        (_, _, m) => format!("{} minutes", m.max(1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_says_when_the_key_expires_in_words() {
        let now: DateTime<Utc> = "2026-11-26T08:00:00Z".parse().unwrap();
        let mut key: KeyInfo = serde_json::from_value(serde_json::json!({
            "id": "k", "name": "splunk-prod", "prefix": "svc_k3jx2a",
            "scopes": ["read:findings", "read:some_future_scope"],
            "customer": {"id": "c1", "name": "Contoso"},
            "createdAt": "2026-11-01T09:00:00Z", "expiresAt": "2026-12-01T08:00:00Z",
            "lastUsedAt": null, "someNewField": true
        }))
        .unwrap();
        let text = render(&key, now);
        assert!(
            text.contains("scopes     read:findings, read:some_future_scope\n"),
            "{text}"
        );
        assert!(
            text.contains("expires    2026-12-01T08:00:00Z (in 5 days)"),
            "{text}"
        );
        assert!(text.contains("last used  not recorded yet"), "{text}");
        key.expires_at = Some(now + chrono::TimeDelta::minutes(90));
        assert!(render(&key, now).contains("(in 90 minutes)"));
        key.expires_at = Some(now);
        assert!(render(&key, now).contains("(expired)"));
        key.expires_at = None;
        assert!(render(&key, now).contains("expires    never"));
    }
}
