//! Sending one delivery, through the one guarded way out (`posture-egress`): only to the
//! addresses the policy permits, to the address that was checked, no redirects (a 3xx is a
//! failed attempt), no proxies, a timeout (10 s by default).
//!
//! What an attempt says to the customer is coarse — the receiver's status, unreachable, no
//! answer in time — so that the delivery log cannot be used to map what lies behind a
//! receiver's address (connection refused against closed, a TLS error, a name that only
//! resolves inside the network); what the network said is kept for operators
//! (`Attempt::detail`).
//!
//! `allow_private` (development and tests) turns the address checks off.

use std::sync::Arc;

use posture_domain::clock::Clock;
use std::time::Duration;

use chrono::{DateTime, Utc};
use posture_domain::{
    delivery::{Attempt, Outcome, RESPONSE_EXCERPT_BYTES},
    egress::EgressPolicy,
    outside,
    signature::{signature_header, standard_signature},
};
use reqwest::header::{HeaderMap, HeaderValue};
use url::Url;

/// What a customer is told when no connection to the receiver was made.
pub const UNREACHABLE: &str = "unreachable: posture could not connect to the receiver";

/// What a customer is told when the receiver's answer could not be read.
pub const UNREADABLE: &str = "the receiver's answer could not be read";

/// The HTTP client of the worker.
#[derive(Clone)]
pub struct WebhookClient {
    http: reqwest::Client,
    policy: EgressPolicy,
    timeout: Duration,
    clock: Arc<dyn Clock>,
}

/// What the headers of one delivery say; the signatures are made per attempt, as it starts
/// (the Standard Webhooks one covers the attempt's time).
pub struct DeliveryHeaders<'a> {
    pub event: &'a str,
    pub delivery_id: &'a str,
    /// The subscription's signing secret.
    pub secret: &'a str,
    /// The secret a rotation replaced, while its overlap lasts: `X-Service-Signature-256`
    /// keeps using it, and `webhook-signature` carries both (the new one first).
    pub previous: Option<&'a str>,
}

impl DeliveryHeaders<'_> {
    /// The request headers of an attempt starting at `timestamp` (Unix seconds).
    pub fn at(&self, timestamp: i64, body: &[u8]) -> HeaderMap {
        let seed = signature_header(self.previous.unwrap_or(self.secret), body);
        let standard = std::iter::once(self.secret)
            .chain(self.previous)
            .map(|secret| standard_signature(secret, self.delivery_id, timestamp, body))
            .collect::<Option<Vec<_>>>()
            .map(|entries| entries.join(" "));
        let timestamp = timestamp.to_string();
        let mut map = HeaderMap::new();
        map.insert("content-type", HeaderValue::from_static("application/json"));
        for (name, value) in [
            ("x-service-event", Some(self.event)),
            ("x-service-signature-256", Some(seed.as_str())),
            ("x-service-delivery", Some(self.delivery_id)),
            ("webhook-id", Some(self.delivery_id)),
            ("webhook-timestamp", Some(timestamp.as_str())),
            ("webhook-signature", standard.as_deref()),
        ] {
            if let Some(Ok(value)) = value.map(HeaderValue::from_str) {
                map.insert(name, value);
            }
        }
        map
    }
}

/// The user agent of deliveries.
pub fn user_agent() -> String {
    format!("posture-webhooks/{}", env!("CARGO_PKG_VERSION"))
}

impl WebhookClient {
    pub fn new(
        timeout: Duration,
        allow_private: bool,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, reqwest::Error> {
        let policy = EgressPolicy {
            allow_private,
            allowed_networks: Vec::new(),
        };
        Ok(Self {
            http: posture_egress::client(policy.clone(), timeout, &user_agent())?,
            policy,
            timeout,
            clock,
        })
    }

    /// POSTs `body` once; says what came of it.
    pub async fn send(
        &self,
        url: &str,
        body: &[u8],
        headers: &DeliveryHeaders<'_>,
    ) -> (Outcome, Attempt) {
        let started_at = self.clock.now();
        let clock = std::time::Instant::now();
        let http = self.policy.allow_private;
        let (outcome, status_code, excerpt, detail) =
            match posture_egress::check_url(url, &self.policy, http) {
                Err(refused) => (
                    Outcome::Failed {
                        status: None,
                        error: refused.to_string(),
                        retry_after: None,
                    },
                    None,
                    None,
                    None,
                ),
                Ok(url) => self.post(url, body, headers).await,
            };
        let error = match &outcome {
            Outcome::Failed { error, .. } => Some(error.clone()),
            Outcome::Gone => Some("HTTP 410 Gone: the subscription was deactivated".to_owned()),
            Outcome::Delivered { .. } => None,
        };
        let attempt = Attempt {
            number: 0,
            started_at,
            latency_ms: u32::try_from(clock.elapsed().as_millis()).unwrap_or(u32::MAX),
            status_code,
            error,
            response_excerpt: excerpt,
            detail,
        };
        (outcome, attempt.storable())
    }

    async fn post(
        &self,
        url: Url,
        body: &[u8],
        headers: &DeliveryHeaders<'_>,
    ) -> (Outcome, Option<u16>, Option<String>, Option<String>) {
        let map = headers.at(self.clock.now().timestamp(), body);
        let response = match self
            .http
            .post(url)
            .headers(map)
            .body(body.to_vec())
            .send()
            .await
        {
            Ok(response) => response,
            Err(e) => {
                let (error, detail) = self.describe(&e.without_url());
                return (
                    Outcome::Failed {
                        status: None,
                        error,
                        retry_after: None,
                    },
                    None,
                    None,
                    Some(detail),
                );
            }
        };
        let status = response.status();
        let retry_after = retry_after(response.headers(), self.clock.now());
        let excerpt = excerpt(response).await;
        (
            Outcome::of_status(status.as_u16(), retry_after),
            Some(status.as_u16()),
            excerpt,
            None,
        )
    }

    /// What went wrong: the coarse outcome the customer is told, and what the network said
    /// (for operators). Never the URL: a Slack or Teams webhook URL is itself a credential
    /// (the caller strips it from `e`).
    fn describe(&self, e: &reqwest::Error) -> (String, String) {
        let mut detail = e.to_string();
        let mut cause = std::error::Error::source(e);
        while let Some(inner) = cause {
            detail.push_str(": ");
            detail.push_str(&inner.to_string());
            cause = inner.source();
        }
        let error = if e.is_timeout() {
            format!("no answer within {} s", self.timeout.as_secs_f64())
        } else if posture_egress::is_refused(e) || e.is_connect() {
            UNREACHABLE.to_owned()
        } else {
            UNREADABLE.to_owned()
        };
        (error, detail)
    }
}

/// `Retry-After` as delay-seconds or an HTTP date.
fn retry_after(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = DateTime::parse_from_rfc2822(value)
        .ok()?
        .with_timezone(&Utc);
    (at - now).to_std().ok()
}

/// At most [`RESPONSE_EXCERPT_BYTES`] of the answer's body, as text.
async fn excerpt(mut response: reqwest::Response) -> Option<String> {
    let mut bytes = Vec::new();
    while bytes.len() < RESPONSE_EXCERPT_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    bytes.truncate(RESPONSE_EXCERPT_BYTES);
    (!bytes.is_empty())
        .then(|| outside::excerpt(&String::from_utf8_lossy(&bytes), RESPONSE_EXCERPT_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_as_seconds_or_a_date() {
        let now = DateTime::parse_from_rfc3339("2026-11-22T06:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("120"));
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(120)));
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Sun, 22 Nov 2026 06:01:30 GMT"),
        );
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(90)));
        headers.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers, now), None);
    }
}
