//! The posture service as the CLI sees it: where it is, the key, and requests that wait out
//! 429s, retry 503s and network failures, and turn every other answer into words.

use std::{net::IpAddr, sync::Arc, time::Duration};

use reqwest::{Response, StatusCode, header::HeaderMap};
use serde::Deserialize;
use url::Url;

use crate::body::{BodyError, MAX_ERROR, MAX_JSON, read_limited, read_prefix};

/// What the CLI tells its user while it waits (the progress bar or stderr shows it).
pub type Notices = Arc<dyn Fn(&str) + Send + Sync>;

/// A failure, said in words; `Display` is what the user reads.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(
        "the key was not accepted: revoked, expired or mistyped (check POSTURE_API_KEY; \
         `posture whoami` shows what the service knows of a key)"
    )]
    Unauthorized,
    #[error("the key may not do this: {reason} (ask your admin for a key with that scope)")]
    Forbidden { reason: String },
    #[error("posture refused the request: {reason}")]
    Refused { status: StatusCode, reason: String },
    #[error(
        "posture is unavailable ({status}) after {attempts} attempts; run the command again later"
    )]
    Unavailable { status: StatusCode, attempts: u32 },
    #[error("posture failed ({status}{}); quote request id {request_id} when reporting it", reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    Server {
        status: StatusCode,
        reason: Option<String>,
        request_id: String,
    },
    #[error("could not reach {url} after {attempts} attempts: {cause}")]
    Network {
        url: String,
        attempts: u32,
        cause: String,
    },
    #[error("posture answered something this CLI does not understand: {0}")]
    Unexpected(String),
}

impl ApiError {
    /// A 400 about the `after` cursor (e.g. issued before the operator rotated the server's
    /// secret): the caller may start again without it.
    pub fn is_refused_cursor(&self) -> bool {
        matches!(self, ApiError::Refused { status, reason }
            if *status == StatusCode::BAD_REQUEST && reason.starts_with("after"))
    }
}

/// Where the service is and the key to show it: `POSTURE_URL` and `POSTURE_API_KEY`.
#[derive(Clone)]
pub struct Target {
    /// The service's base URL, ending in `/`.
    pub base: Url,
    key: String,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

/// Why `POSTURE_URL` or `POSTURE_API_KEY` cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    #[error("POSTURE_URL is not set: export POSTURE_URL=https://posture.example.com")]
    NoUrl,
    #[error("POSTURE_URL is not a URL ({0}): it looks like https://posture.example.com")]
    BadUrl(String),
    #[error(
        "POSTURE_URL must be https:// (plain http is accepted only for localhost, where no \
         network sees the key)"
    )]
    NotHttps,
    #[error(
        "POSTURE_API_KEY is not set: export it in your shell (a key is never a flag, which \
         would stay in the shell's history)"
    )]
    NoKey,
    #[error("POSTURE_API_KEY is not a posture key: keys begin with svc_")]
    BadKey,
}

impl Target {
    /// Checks a base URL and a key: https (or http to a loopback host), a `svc_` key.
    pub fn new(url: Option<&str>, key: Option<&str>) -> Result<Self, TargetError> {
        let url = url
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .ok_or(TargetError::NoUrl)?;
        let mut base = Url::parse(url).map_err(|e| TargetError::BadUrl(e.to_string()))?;
        let loopback = match base.host() {
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
            Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
            None => return Err(TargetError::BadUrl("no host".into())),
        };
        match base.scheme() {
            "https" => {}
            "http" if loopback => {}
            "http" => return Err(TargetError::NotHttps),
            other => return Err(TargetError::BadUrl(format!("scheme {other}"))),
        }
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        base.set_query(None);
        base.set_fragment(None);
        let key = key
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .ok_or(TargetError::NoKey)?;
        let well_formed = key.starts_with("svc_")
            && key.len() <= 256
            && key.bytes().all(|b| b.is_ascii_graphic());
        if !well_formed {
            return Err(TargetError::BadKey);
        }
        Ok(Self {
            base,
            key: key.to_owned(),
        })
    }

    /// From the environment: `POSTURE_URL` and `POSTURE_API_KEY`.
    pub fn from_env() -> Result<Self, TargetError> {
        let url = std::env::var("POSTURE_URL").ok();
        let key = std::env::var("POSTURE_API_KEY").ok();
        Self::new(url.as_deref(), key.as_deref())
    }

    /// The URL of an API path (`findings` → `<base>/api/v1/findings`).
    pub fn api_url(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        url.set_path(&format!("{}api/v1/{path}", self.base.path()));
        url
    }
}

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
}

/// A client of one posture service with one key.
#[derive(Clone)]
pub struct Api {
    target: Target,
    http: reqwest::Client,
    retries: Retries,
    notices: Notices,
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
        let mut attempt = 0;
        loop {
            let sent = self
                .http
                .get(url.clone())
                .headers(headers.clone())
                .bearer_auth(&self.target.key)
                .send()
                .await;
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
            let retry_after = retry_after(response.headers());
            match status {
                StatusCode::TOO_MANY_REQUESTS => {
                    let wait = retry_after.unwrap_or(Duration::from_secs(1));
                    (self.notices)(&format!(
                        "rate limited: the key's requests are used up until the window \
                         resets; waiting {} s as the service asks (Retry-After)",
                        wait.as_secs()
                    ));
                    tokio::time::sleep(wait).await;
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
    let reason = serde_json::from_slice::<ErrorBody>(&body)
        .ok()
        .and_then(|b| b.reason)
        .map(|r| {
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
        },
        _ => ApiError::Server {
            status,
            reason,
            request_id,
        },
    }
}

/// A network failure in a few words (the innermost cause says the most).
pub fn describe(e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    if e.is_timeout() {
        "timed out".to_owned()
    } else {
        cause.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_must_be_https_but_for_loopback_and_the_key_a_posture_key() {
        let ok = |url: &str| Target::new(Some(url), Some("svc_abc")).map(|t| t.base.to_string());
        assert_eq!(
            ok("https://posture.example.com").unwrap(),
            "https://posture.example.com/"
        );
        assert_eq!(
            ok("https://example.com/posture?x=1").unwrap(),
            "https://example.com/posture/"
        );
        assert!(ok("http://127.0.0.1:8080").is_ok());
        assert!(ok("http://[::1]:8080").is_ok());
        assert!(ok("http://LOCALHOST:8080").is_ok());
        assert_eq!(ok("http://posture.example.com"), Err(TargetError::NotHttps));
        assert_eq!(ok("http://10.0.0.1"), Err(TargetError::NotHttps));
        assert!(matches!(ok("ftp://x"), Err(TargetError::BadUrl(_))));
        assert!(matches!(
            ok("posture.example.com"),
            Err(TargetError::BadUrl(_))
        ));
        assert_eq!(ok("  ").map(|_| ()), Err(TargetError::NoUrl));
        let key = |k: Option<&str>| Target::new(Some("https://x"), k).map(|_| ());
        assert_eq!(key(None), Err(TargetError::NoKey));
        assert_eq!(key(Some("")), Err(TargetError::NoKey));
        assert_eq!(key(Some("sk_live_x")), Err(TargetError::BadKey));
        assert_eq!(key(Some("svc_a b")), Err(TargetError::BadKey));
    }

    #[test]
    fn api_paths_are_under_the_base_and_the_key_is_never_shown() {
        let target = Target::new(Some("https://example.com/posture"), Some("svc_secret")).unwrap();
        assert_eq!(
            target.api_url("findings").as_str(),
            "https://example.com/posture/api/v1/findings"
        );
        assert!(!format!("{target:?}").contains("svc_secret"));
    }

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
}
