//! The posture service as the CLI sees it: where it is, the key, and requests that wait out
//! 429s, retry 503s and network failures, and turn every other answer into words.

use std::{sync::Arc, time::Duration};

use reqwest::{
    Method, Response, StatusCode,
    header::{CONTENT_TYPE, HeaderMap, HeaderValue},
};
use serde::Deserialize;
use url::Url;

pub use crate::error::{ApiError, describe};
pub use crate::target::{Target, TargetError};
use crate::{
    body::{BodyError, MAX_ERROR, MAX_JSON, read_limited, read_prefix},
    tokens::Tokens,
};

/// What the CLI tells its user while it waits (the progress bar or stderr shows it).
pub type Notices = Arc<dyn Fn(&str) + Send + Sync>;

/// How long to wait before retrying a 503 or a network failure, and how often to try.
#[derive(Clone, Copy, Debug)]
pub struct Retries {
    /// The first wait; each next one doubles, up to `max_wait`.
    pub first_wait: Duration,
    pub max_wait: Duration,
    /// Attempts of one request before giving up (429s do not count: the service said when).
    pub attempts: u32,
}

impl Default for Retries {
    fn default() -> Self {
        Self {
            first_wait: Duration::from_secs(1),
            max_wait: Duration::from_secs(30),
            attempts: 8,
        }
    }
}

impl Retries {
    /// The wait after the `attempt`-th failure in a row (0 for the first).
    pub fn wait(&self, attempt: u32) -> Duration {
        self.first_wait
            .saturating_mul(1 << attempt.min(16))
            .min(self.max_wait)
    }
}

/// The error body of every 4xx and 5xx.
#[derive(Deserialize)]
struct ErrorBody {
    reason: Option<String>,
    kind: Option<String>,
}

/// A client of one posture service with one key (or one OAuth client's tokens).
#[derive(Clone)]
pub struct Api {
    target: Target,
    http: reqwest::Client,
    retries: Retries,
    notices: Notices,
    tokens: Arc<Tokens>,
}

/// The longest a single request may take (a long-poll waits 30 s at most).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);
/// The longest `Retry-After` the CLI obeys (the default rate window is 15 minutes).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

impl Api {
    pub fn new(target: Target, retries: Retries, notices: Notices) -> anyhow::Result<Self> {
        // reqwest is built without a default TLS crypto provider here: use ring's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .user_agent(concat!("posture-cli/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(REQUEST_TIMEOUT)
            // A redirect would carry the key elsewhere: the service never redirects its API.
            .redirect(reqwest::redirect::Policy::none());
        // Plain http is accepted only for a loopback host (`Target::new`), and then the key
        // goes to that host and nowhere else: not through HTTP_PROXY or ALL_PROXY, which
        // would receive it in plain text. Over https a proxy sees only a tunnel.
        let http = if target.base.scheme() == "http" {
            http.no_proxy()
        } else {
            http
        }
        .build()?;
        Ok(Self {
            target,
            http,
            retries,
            notices,
            tokens: Arc::new(Tokens::new()),
        })
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    pub fn notices(&self) -> &Notices {
        &self.notices
    }

    /// GET an API path with a query until it is answered: waits out 429s (`Retry-After`),
    /// retries 502, 503, 504 and network failures with growing waits, and says so through
    /// the notices; a 2xx answer, or the refusal in words.
    pub async fn get(
        &self,
        path: &str,
        query: &[(&str, &str)],
        headers: HeaderMap,
    ) -> Result<Response, ApiError> {
        let mut url = self.target.api_url(path);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        self.send(Method::GET, url, headers, None).await
    }

    /// POST a JSON body to an API path and read the JSON answer, retried as [`Api::get`]
    /// is: the request carries an `Idempotency-Key` of its own (random), so a retry after
    /// a failure that hid the answer is answered with the first answer, never acted twice.
    pub async fn post_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &impl serde::Serialize,
    ) -> Result<T, ApiError> {
        let body = serde_json::to_vec(body).map_err(|e| ApiError::Unexpected(e.to_string()))?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let key = uuid::Uuid::new_v4().to_string();
        headers.insert(
            "idempotency-key",
            HeaderValue::from_str(&key).map_err(|e| ApiError::Unexpected(e.to_string()))?,
        );
        let url = self.target.api_url(path);
        let mut attempt = 0;
        loop {
            let response = self
                .send(
                    Method::POST,
                    url.clone(),
                    headers.clone(),
                    Some(body.clone()),
                )
                .await?;
            match read_limited(response, MAX_JSON).await {
                Ok(answer) => {
                    return serde_json::from_slice(&answer)
                        .map_err(|e| ApiError::Unexpected(format!("{path}: {e}")));
                }
                // The answer was cut: the same key again gets it again.
                Err(BodyError::Network(e)) => {
                    attempt += 1;
                    self.network_failure(&url, attempt, &e).await?;
                }
                Err(BodyError::TooLarge) => {
                    return Err(ApiError::Unexpected(format!(
                        "{path}: an answer over {} MiB (is POSTURE_URL the service?)",
                        MAX_JSON >> 20
                    )));
                }
            }
        }
    }

    /// Sends a request until it is answered (see [`Api::get`]).
    async fn send(
        &self,
        method: Method,
        url: Url,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
    ) -> Result<Response, ApiError> {
        let mut attempt = 0;
        let mut token_refused = false;
        loop {
            let token_url = self.target.token_url();
            let bearer = match self
                .tokens
                .bearer(&self.http, &self.target.credential, &token_url)
                .await
            {
                Ok(bearer) => bearer,
                Err(e) => match e.said(&token_url) {
                    // The token endpoint unreachable or busy: retried as any request is.
                    error @ (ApiError::Network { .. } | ApiError::Unavailable { .. }) => {
                        attempt += 1;
                        if attempt >= self.retries.attempts {
                            return Err(error);
                        }
                        (self.notices)(&format!("no access token yet ({error}); retrying"));
                        tokio::time::sleep(self.retries.wait(attempt - 1)).await;
                        continue;
                    }
                    error => return Err(error),
                },
            };
            let mut request = self
                .http
                .request(method.clone(), url.clone())
                .headers(headers.clone())
                .bearer_auth(&bearer);
            if let Some(body) = &body {
                request = request.body(body.clone());
            }
            let sent = request.send().await;
            let response = match sent {
                Ok(response) => response,
                Err(e) => {
                    attempt += 1;
                    self.network_failure(&url, attempt, &e).await?;
                    continue;
                }
            };
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            // A token refused (its client revoked and issued again, the server's key rotated):
            // one more, once.
            if status == StatusCode::UNAUTHORIZED && !token_refused && self.tokens.forget().await {
                token_refused = true;
                continue;
            }
            let retry_after = retry_after(response.headers());
            match status {
                StatusCode::TOO_MANY_REQUESTS => {
                    let wait = retry_after.unwrap_or(Duration::from_secs(1));
                    (self.notices)(&format!(
                        "rate limited: {}; waiting {} s as the service asks (Retry-After)",
                        used_up(response.headers()),
                        wait.as_secs()
                    ));
                    tokio::time::sleep(wait).await;
                }
                // A retry of ours that found the first attempt still running (its key held).
                StatusCode::CONFLICT if attempt > 0 && headers.contains_key("idempotency-key") => {
                    attempt += 1;
                    if attempt >= self.retries.attempts {
                        return Err(refusal(response).await);
                    }
                    tokio::time::sleep(self.retries.wait(attempt - 1)).await;
                }
                StatusCode::BAD_GATEWAY
                | StatusCode::SERVICE_UNAVAILABLE
                | StatusCode::GATEWAY_TIMEOUT => {
                    attempt += 1;
                    if attempt >= self.retries.attempts {
                        return Err(ApiError::Unavailable {
                            status,
                            attempts: attempt,
                        });
                    }
                    let wait = retry_after
                        .unwrap_or_default()
                        .max(self.retries.wait(attempt - 1));
                    (self.notices)(&format!(
                        "posture is unavailable ({status}); retrying in {} s \
                         (attempt {attempt} of {})",
                        wait.as_secs_f32().ceil(),
                        self.retries.attempts
                    ));
                    tokio::time::sleep(wait).await;
                }
                _ => return Err(refusal(response).await),
            }
        }
    }

    /// GET a JSON document (retrying, like [`Api::get`], also when its body is cut).
    pub async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<(T, HeaderMap), ApiError> {
        let mut attempt = 0;
        loop {
            let response = self.get(path, query, HeaderMap::new()).await?;
            let headers = response.headers().clone();
            match read_limited(response, MAX_JSON).await {
                Ok(body) => {
                    let value = serde_json::from_slice(&body)
                        .map_err(|e| ApiError::Unexpected(format!("{path}: {e}")))?;
                    return Ok((value, headers));
                }
                Err(BodyError::Network(e)) => {
                    attempt += 1;
                    self.network_failure(&self.target.api_url(path), attempt, &e)
                        .await?;
                }
                Err(BodyError::TooLarge) => {
                    return Err(ApiError::Unexpected(format!(
                        "{path}: an answer over {} MiB (is POSTURE_URL the service?)",
                        MAX_JSON >> 20
                    )));
                }
            }
        }
    }

    /// Waits before another attempt after a network failure, or gives up.
    async fn network_failure(
        &self,
        url: &Url,
        attempt: u32,
        e: &reqwest::Error,
    ) -> Result<(), ApiError> {
        let cause = describe(e);
        let place = format!("{}://{}", url.scheme(), url.authority());
        if attempt >= self.retries.attempts {
            return Err(ApiError::Network {
                url: place,
                attempts: attempt,
                cause,
            });
        }
        let wait = self.retries.wait(attempt - 1);
        (self.notices)(&format!(
            "could not reach {place} ({cause}); retrying in {} s (attempt {attempt} of {})",
            wait.as_secs_f32().ceil(),
            self.retries.attempts
        ));
        tokio::time::sleep(wait).await;
        Ok(())
    }
}

/// `Retry-After` in seconds, bounded.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds).clamp(Duration::from_secs(1), MAX_RETRY_AFTER))
}

/// Which budget a 429 says is used up, in words: the first policy of its `RateLimit`
/// header (the one that refused), as the service names it.
fn used_up(headers: &HeaderMap) -> String {
    let policy = headers
        .get("ratelimit")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split([';', ',']).next())
        .map(|name| name.trim().trim_matches('"'))
        .filter(|name| {
            !name.is_empty()
                && name.len() <= 64
                && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
        });
    let words = match policy {
        None | Some("per-key") => "the key's requests are used up until the window resets",
        Some("per-customer") => {
            "your organisation's requests (all its keys together) are used up until the window \
             resets"
        }
        Some("triage-writes-per-customer") => {
            "your organisation's triage writes (120 a minute, all keys together) are used up"
        }
        Some("triage-bytes-per-customer") => {
            "what your organisation's triage writes may add to storage this hour is used up \
             (32 MiB: 1 KiB a finding written, and the comment once)"
        }
        Some("webhook-test") => "this subscription's test deliveries (5 a minute) are used up",
        Some("webhook-test-per-customer") => {
            "your organisation's test deliveries (20 a minute) are used up"
        }
        Some(other) => return format!("the service's budget \"{other}\" is used up"),
    };
    words.to_owned()
}

/// A refused request, in words.
async fn refusal(response: Response) -> ApiError {
    let status = response.status();
    let request_id = response
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("(none)")
        .to_owned();
    // An error body is small; a proxy's HTML page need not be read whole.
    let body = read_prefix(response, MAX_ERROR).await;
    let (reason, kind) = serde_json::from_slice::<ErrorBody>(&body)
        .map(|b| (b.reason, b.kind))
        .unwrap_or_default();
    let reason = reason.map(|r| {
        r.chars()
            .filter(|c| !c.is_control())
            .take(500)
            .collect::<String>()
    });
    let said = || reason.clone().unwrap_or_else(|| status.to_string());
    match status {
        StatusCode::UNAUTHORIZED => ApiError::Unauthorized,
        StatusCode::FORBIDDEN => ApiError::Forbidden { reason: said() },
        s if s.is_client_error() => ApiError::Refused {
            status,
            reason: said(),
            kind,
        },
        _ => ApiError::Server {
            status,
            reason,
            request_id,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_longest_and_retry_after_is_bounded() {
        let r = Retries::default();
        let waits: Vec<u64> = (0..7).map(|a| r.wait(a).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "0".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(1)));
        headers.insert("retry-after", "99999999".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(MAX_RETRY_AFTER));
        headers.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn a_429_is_said_by_the_budget_that_refused_it() {
        let said = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("ratelimit", value.parse().unwrap());
            used_up(&headers)
        };
        assert!(
            said("\"triage-writes-per-customer\";r=0;t=37, \"per-key\";r=878;t=600")
                .contains("triage writes (120 a minute")
        );
        assert!(said("\"triage-bytes-per-customer\";r=10;t=3000").contains("storage"));
        assert!(said("\"per-key\";r=0;t=60").contains("the key's requests"));
        assert_eq!(
            said("\"a-newer-budget\";r=0;t=1"),
            "the service's budget \"a-newer-budget\" is used up"
        );
        // What a server sends is shown only when it is a plain name.
        assert!(said("\"\\u001b[31mred\";r=0").contains("the key's requests"));
        assert!(used_up(&HeaderMap::new()).contains("the key's requests"));
    }
}
