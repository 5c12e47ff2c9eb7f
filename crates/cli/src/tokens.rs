//! An OAuth client's access tokens (docs/auth.md): fetched from `POST /oauth/token` when a
//! command first needs one, kept in memory, and fetched again a minute before they expire
//! (a `sync` or a `listen` runs for hours) or when the service refuses one (a revocation
//! elsewhere, a rotated server key). Never written anywhere, never shown. A secret goes in
//! the `Authorization` header (`client_secret_basic`); a private key signs an assertion
//! (`credential.rs`).

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde::Deserialize;
use tokio::sync::Mutex;
use url::Url;

use crate::{
    credential::{Credential, Proof},
    error::{ApiError, describe},
};

const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// A token is renewed this long before it expires.
const RENEW_BEFORE: Duration = Duration::from_secs(60);

/// A token and when to fetch the next.
struct Held {
    token: String,
    renew_at: Instant,
}

/// Why no token could be had.
#[derive(Debug)]
pub(crate) enum TokenError {
    /// The token endpoint could not be reached.
    Network(reqwest::Error),
    /// It refused: its status, its `error` and the reason it gave.
    Refused {
        status: StatusCode,
        error: Option<String>,
        reason: String,
    },
    /// Anything else (an answer that is not a token, a key that cannot sign).
    Unexpected(String),
}

impl TokenError {
    /// Said as the CLI says other failures (`token_url`: where it was asked).
    pub(crate) fn said(self, token_url: &Url) -> ApiError {
        match self {
            TokenError::Network(e) => ApiError::Network {
                url: token_url.to_string(),
                attempts: 1,
                cause: describe(&e),
            },
            TokenError::Refused { error, reason, .. }
                if error.as_deref() == Some("invalid_client") =>
            {
                ApiError::ClientRefused { reason }
            }
            TokenError::Refused { status, .. }
                if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() =>
            {
                ApiError::Unavailable {
                    status,
                    attempts: 1,
                }
            }
            TokenError::Refused { status, reason, .. } => ApiError::Refused {
                status,
                reason,
                kind: None,
            },
            TokenError::Unexpected(what) => ApiError::Unexpected(what),
        }
    }
}

/// The tokens of the target's client (none for a key).
pub(crate) struct Tokens {
    held: Mutex<Option<Held>>,
}

#[derive(Deserialize)]
struct Issued {
    access_token: String,
    expires_in: u64,
}

#[derive(Deserialize)]
struct Refused {
    error: Option<String>,
    error_description: Option<String>,
}

impl Tokens {
    pub(crate) fn new() -> Self {
        Self {
            held: Mutex::new(None),
        }
    }

    /// What to send as `Bearer`: the key, or a token that has more than a minute left.
    pub(crate) async fn bearer(
        &self,
        http: &reqwest::Client,
        credential: &Credential,
        token_url: &Url,
    ) -> Result<String, TokenError> {
        let (id, proof) = match credential {
            Credential::Key(key) => return Ok(key.clone()),
            Credential::Client { id, proof } => (id, proof),
        };
        let mut held = self.held.lock().await;
        if let Some(current) = held.as_ref().filter(|h| Instant::now() < h.renew_at) {
            return Ok(current.token.clone());
        }
        let issued = fetch(http, token_url, id, proof).await?;
        let lifetime = Duration::from_secs(issued.expires_in);
        let renew_in = lifetime.saturating_sub(RENEW_BEFORE).max(lifetime / 2);
        let token = issued.access_token;
        *held = Some(Held {
            token: token.clone(),
            renew_at: Instant::now() + renew_in,
        });
        Ok(token)
    }

    /// Forgets the token (the service refused it): the next request fetches another.
    /// `true` if there was one to forget.
    pub(crate) async fn forget(&self) -> bool {
        self.held.lock().await.take().is_some()
    }
}

/// One token request.
async fn fetch(
    http: &reqwest::Client,
    url: &Url,
    id: &str,
    proof: &Proof,
) -> Result<Issued, TokenError> {
    let mut form: Vec<(&str, String)> = vec![("grant_type", "client_credentials".to_owned())];
    let mut request = http.post(url.clone());
    match proof {
        Proof::Secret(secret) => request = request.basic_auth(id, Some(secret)),
        Proof::PrivateKey(key) => {
            form.push(("client_assertion_type", ASSERTION_TYPE.to_owned()));
            form.push((
                "client_assertion",
                key.sign(id, url.as_str()).map_err(TokenError::Unexpected)?,
            ));
        }
    }
    let body = form
        .iter()
        .map(|(name, value)| {
            format!(
                "{name}={}",
                url::form_urlencoded::byte_serialize(value.as_bytes()).collect::<String>()
            )
        })
        .collect::<Vec<_>>()
        .join("&");
    let response = request
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .send()
        .await
        .map_err(TokenError::Network)?;
    let status = response.status();
    let text = crate::body::read_prefix(response, crate::body::MAX_ERROR).await;
    if status == StatusCode::OK {
        return serde_json::from_slice(&text)
            .map_err(|e| TokenError::Unexpected(format!("the token endpoint's answer: {e}")));
    }
    let refused: Option<Refused> = serde_json::from_slice(&text).ok();
    let reason = refused
        .as_ref()
        .and_then(|r| r.error_description.clone().or(r.error.clone()))
        .unwrap_or_else(|| format!("{status}"));
    Err(TokenError::Refused {
        status,
        error: refused.and_then(|r| r.error),
        reason,
    })
}
