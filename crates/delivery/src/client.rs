//! Sending one delivery, with the SSRF guard.
//!
//! * Host names are resolved by [`PublicOnlyResolver`], which drops every address that is
//!   not public (`egress::is_public`) and fails when none is left; the connection is made to
//!   the addresses it returned — there is no second lookup for a rebinding to exploit.
//! * Literal addresses in the URL do not go through a resolver: they are checked here.
//! * Redirects are never followed (a 3xx is a failed attempt), proxies from the environment
//!   are ignored (they would resolve the name themselves), and the whole request has a
//!   timeout (10 s by default).
//!
//! `allow_private` (development and tests) turns the address checks off.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use posture_domain::{
    delivery::{Attempt, Outcome, RESPONSE_EXCERPT_BYTES},
    egress,
    signature::{signature_header, standard_signature},
};
use reqwest::{
    dns::{Addrs, Name, Resolve, Resolving},
    header::{HeaderMap, HeaderValue},
};
use url::{Host, Url};

/// A host whose every address is non-public.
#[derive(Debug)]
struct RefusedTarget(String);

impl std::fmt::Display for RefusedTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves only to non-public addresses", self.0)
    }
}

impl std::error::Error for RefusedTarget {}

/// Resolves through the system resolver and keeps only public addresses.
struct PublicOnlyResolver {
    allow_private: bool,
}

impl Resolve for PublicOnlyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|a| allow_private || egress::is_public(a.ip()))
                .collect();
            if allowed.is_empty() {
                return Err(
                    Box::new(RefusedTarget(host)) as Box<dyn std::error::Error + Send + Sync>
                );
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// Why a receiver URL is not posted to.
#[derive(Debug, thiserror::Error)]
enum UrlRefused {
    #[error("invalid URL: {0}")]
    Invalid(url::ParseError),
    #[error("refused: the URL does not use https")]
    NotHttps,
    #[error("refused: the URL's address is not public")]
    NotPublic,
}

/// The HTTP client of the worker.
#[derive(Clone)]
pub struct WebhookClient {
    http: reqwest::Client,
    allow_private: bool,
    timeout: Duration,
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
    pub fn new(timeout: Duration, allow_private: bool) -> Result<Self, reqwest::Error> {
        // reqwest is built without a default TLS crypto provider: use ring's (installing it
        // again is a no-op).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .dns_resolver(Arc::new(PublicOnlyResolver { allow_private }))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(timeout)
            .connect_timeout(timeout)
            .user_agent(user_agent())
            .build()?;
        Ok(Self {
            http,
            allow_private,
            timeout,
        })
    }

    /// Checks the URL itself: scheme and literal addresses.
    fn check_url(&self, url: &str) -> Result<Url, UrlRefused> {
        let url = Url::parse(url).map_err(UrlRefused::Invalid)?;
        if self.allow_private {
            return Ok(url);
        }
        if url.scheme() != "https" {
            return Err(UrlRefused::NotHttps);
        }
        let literal = match url.host() {
            Some(Host::Ipv4(ip)) => Some(ip.into()),
            Some(Host::Ipv6(ip)) => Some(ip.into()),
            _ => None,
        };
        if literal.is_some_and(|ip| !egress::is_public(ip)) {
            return Err(UrlRefused::NotPublic);
        }
        Ok(url)
    }

    /// POSTs `body` once; says what came of it.
    pub async fn send(
        &self,
        url: &str,
        body: &[u8],
        headers: &DeliveryHeaders<'_>,
    ) -> (Outcome, Attempt) {
        let started_at = Utc::now();
        let clock = std::time::Instant::now();
        let (outcome, status_code, excerpt) = match self.check_url(url) {
            Err(refused) => (
                Outcome::Failed {
                    status: None,
                    error: refused.to_string(),
                    retry_after: None,
                },
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
        };
        (outcome, attempt)
    }

    async fn post(
        &self,
        url: Url,
        body: &[u8],
        headers: &DeliveryHeaders<'_>,
    ) -> (Outcome, Option<u16>, Option<String>) {
        let map = headers.at(Utc::now().timestamp(), body);
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
                return (
                    Outcome::Failed {
                        status: None,
                        error: self.describe(&e.without_url()),
                        retry_after: None,
                    },
                    None,
                    None,
                );
            }
        };
        let status = response.status();
        let retry_after = retry_after(response.headers(), Utc::now());
        let excerpt = excerpt(response).await;
        (
            Outcome::of_status(status.as_u16(), retry_after),
            Some(status.as_u16()),
            excerpt,
        )
    }

    /// A short, useful description of a failed request.
    /// What went wrong, for the attempt's record and the log. Never the URL: a Slack or
    /// Teams webhook URL is itself a credential (the caller strips it from `e`).
    fn describe(&self, e: &reqwest::Error) -> String {
        let mut source = std::error::Error::source(e);
        while let Some(cause) = source {
            if let Some(refused) = cause.downcast_ref::<RefusedTarget>() {
                return format!("refused: {refused}");
            }
            source = cause.source();
        }
        // Each cause says what the one before could not (reqwest's own text is generic).
        let chain = || {
            let mut text = String::new();
            let mut cause = std::error::Error::source(e);
            while let Some(inner) = cause {
                text.push_str(": ");
                text.push_str(&inner.to_string());
                cause = inner.source();
            }
            text
        };
        if e.is_timeout() {
            format!("no answer within {} s", self.timeout.as_secs_f64())
        } else if e.is_connect() {
            let mut text = "connection failed".to_owned();
            let mut cause = std::error::Error::source(e);
            while let Some(inner) = cause {
                text = format!("connection failed: {inner}");
                cause = inner.source();
            }
            text
        } else {
            format!("request failed: {e}{}", chain())
        }
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
    (!bytes.is_empty()).then(|| String::from_utf8_lossy(&bytes).into_owned())
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

    #[test]
    fn literal_private_addresses_and_http_are_refused_unless_allowed() {
        let strict = WebhookClient::new(Duration::from_secs(1), false).unwrap();
        assert!(strict.check_url("https://127.0.0.1/x").is_err());
        assert!(strict.check_url("https://[::ffff:10.0.0.1]/x").is_err());
        assert!(strict.check_url("http://hooks.example.com/x").is_err());
        assert!(strict.check_url("https://hooks.example.com/x").is_ok());
        let dev = WebhookClient::new(Duration::from_secs(1), true).unwrap();
        assert!(dev.check_url("http://127.0.0.1:9/x").is_ok());
    }
}
