//! `posture listen --forward-to URL`: follows the events feed (long-polls of
//! `GET /api/v1/events`) and POSTs each event, as the API sent it, to a local URL with
//! Standard Webhooks headers signed with a secret of the user's, waiting for the receiver
//! while it is down. Events are forwarded one at a time, in the feed's order.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use url::Url;

use crate::{
    body::{BodyError, MAX_JSON, read_limited},
    client::{Api, ApiError, Retries, describe},
};

/// The longest a long-poll waits for an event (the API's own bound).
const WAIT_SECS: &str = "30";
/// Events per request.
const LIMIT: &str = "100";
/// How long the local receiver has to answer.
const RECEIVER_TIMEOUT: Duration = Duration::from_secs(10);

/// Where to start and what to forward where.
#[derive(Clone, Debug)]
pub struct ListenOptions {
    pub forward_to: Url,
    /// Event types to forward (all when empty).
    pub types: Vec<String>,
    /// The `whsec_` secret the forwarded requests are signed with.
    pub secret: String,
    /// Forward every event after this one (an id `posture listen` printed before).
    pub after: Option<String>,
    /// Without `after`: events created from this time on (the service's "now" by default).
    pub since: Option<DateTime<Utc>>,
    /// Waits while the receiver does not answer: the first, doubling up to the longest.
    pub receiver_retries: Retries,
}

/// One event forwarded, and what the receiver answered.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Forwarded {
    pub event: String,
    #[serde(rename = "type")]
    pub event_type: String,
    pub finding: Option<String>,
    /// The receiver's HTTP status.
    pub status: u16,
    pub millis: u64,
    /// Attempts it took (more than 1 when the receiver was down).
    pub attempts: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("--secret must be a whsec_ secret (whsec_ and base64), as posture's webhooks use")]
    BadSecret,
    #[error("an event without an id or a type: {0}")]
    Malformed(String),
    #[error("could not build the local client: {0}")]
    Client(String),
}

#[derive(Deserialize)]
struct Feed<'a> {
    #[serde(borrow)]
    data: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct EventHead {
    id: String,
    #[serde(rename = "type")]
    event_type: String,
    finding: Option<FindingHead>,
}

#[derive(Deserialize)]
struct FindingHead {
    id: String,
}

/// A new `whsec_` secret (32 bytes from the operating system's CSPRNG).
pub fn new_secret() -> Result<String, ListenError> {
    posture_domain::secrets::SigningSecret::generate()
        .map(|s| s.expose().to_owned())
        .map_err(|_| ListenError::BadSecret)
}

/// Follows the feed and forwards each event; `forwarded` hears of each. Ends only on an error
/// (or when the caller drops it: Ctrl-C).
pub async fn listen(
    api: &Api,
    options: &ListenOptions,
    forwarded: &mut (dyn FnMut(&Forwarded) + Send),
) -> Result<(), ListenError> {
    if posture_domain::signature::standard_signature(&options.secret, "", 0, b"").is_none() {
        return Err(ListenError::BadSecret);
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let local = reqwest::Client::builder()
        .user_agent(concat!("posture-cli/", env!("CARGO_PKG_VERSION")))
        .timeout(RECEIVER_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .map_err(|e| ListenError::Client(e.to_string()))?;
    let types = options.types.join(",");
    let since = options
        .since
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true));
    let mut after = options.after.clone();
    loop {
        let mut query = vec![("wait", WAIT_SECS), ("limit", LIMIT)];
        if !types.is_empty() {
            query.push(("type", types.as_str()));
        }
        match (&after, &since) {
            (Some(after), _) => query.push(("after", after.as_str())),
            (None, Some(since)) => query.push(("createdSince", since.as_str())),
            (None, None) => {}
        }
        let response = api.get("events", &query, Default::default()).await?;
        let body = match read_limited(response, MAX_JSON).await {
            Ok(body) => body,
            // A cut answer: asked again from the same place.
            Err(BodyError::Network(e)) => {
                (api.notices())(&format!(
                    "the events feed was cut ({}); asking again in 1 s",
                    describe(&e)
                ));
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
            Err(BodyError::TooLarge) => {
                return Err(ApiError::Unexpected("events: an answer too large".into()).into());
            }
        };
        let feed: Feed<'_> = serde_json::from_slice(&body)
            .map_err(|e| ApiError::Unexpected(format!("events: {e}")))?;
        for raw in feed.data {
            let head: EventHead = serde_json::from_str(raw.get())
                .map_err(|e| ListenError::Malformed(e.to_string()))?;
            let outcome = forward(&local, options, &head, raw.get().as_bytes(), api).await?;
            forwarded(&outcome);
            after = Some(head.id);
        }
    }
}

/// POSTs one event until the receiver answers (any status: its answer is shown, not judged).
async fn forward(
    local: &reqwest::Client,
    options: &ListenOptions,
    head: &EventHead,
    body: &[u8],
    api: &Api,
) -> Result<Forwarded, ListenError> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let timestamp = Utc::now().timestamp();
        let standard = posture_domain::signature::standard_signature(
            &options.secret,
            &head.id,
            timestamp,
            body,
        )
        .ok_or(ListenError::BadSecret)?;
        let started = Instant::now();
        let sent = local
            .post(options.forward_to.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header("webhook-id", &head.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", standard)
            .header("X-Service-Event", &head.event_type)
            .header("X-Service-Delivery", &head.id)
            .header(
                "X-Service-Signature-256",
                posture_domain::signature::signature_header(&options.secret, body),
            )
            .body(body.to_vec())
            .send()
            .await;
        match sent {
            Ok(response) => {
                return Ok(Forwarded {
                    event: head.id.clone(),
                    event_type: head.event_type.clone(),
                    finding: head.finding.as_ref().map(|f| f.id.clone()),
                    status: response.status().as_u16(),
                    millis: started.elapsed().as_millis() as u64,
                    attempts,
                });
            }
            Err(e) => {
                let wait = options.receiver_retries.wait(attempts - 1);
                (api.notices())(&format!(
                    "{} is not answering ({}); retrying event {} in {} s",
                    options.forward_to,
                    describe(&e),
                    head.id,
                    wait.as_secs_f32().ceil()
                ));
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// The line `posture listen` prints for a forwarded event.
pub fn render(f: &Forwarded, at: DateTime<Utc>) -> String {
    let reason = reqwest::StatusCode::from_u16(f.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    format!(
        "{}  {:<26} {}  {}  -> {} {reason} ({} ms)",
        at.format("%H:%M:%S"),
        f.event_type,
        f.event,
        f.finding.as_deref().unwrap_or("-"),
        f.status,
        f.millis
    )
}
