//! `POST /oauth/token`: the client credentials grant (RFC 6749 §4.4).
//!
//! The request is a form (`application/x-www-form-urlencoded`, at most 16 KiB, no parameter
//! twice) with `grant_type=client_credentials`, an optional `scope` that narrows the token,
//! and exactly one client authentication: `client_secret_basic` (the `Authorization` header),
//! `client_secret_post` (`client_id` and `client_secret` in the form) or `private_key_jwt`
//! (`client_assertion_type` and `client_assertion`, RFC 7523 §2.2).
//!
//! Costs, in order (a made-up credential costs no more than a forged key does at the gate):
//! 1. the form and the grant type are checked (no lookup);
//! 2. the client address's bucket must have a request left (429 otherwise);
//! 3. the client id's form and checksum, then its row (one query), then its secret or
//!    assertion; any failure counts against the address, like a forged key;
//! 4. a client that authenticates counts against its own token bucket
//!    ([`posture_domain::oauth::TOKEN_RATE`]), and its assertion's `jti` is recorded
//!    (a replay is refused, whichever instance sees it);
//! 5. the scope is narrowed, and the token issued.
//!
//! Every answer carries `Cache-Control: no-store` and `Pragma: no-cache` (§5.1). A refusal
//! is `{error, error_description, reason}` with RFC 6749 §5.2's code: 400, or 401 with
//! `WWW-Authenticate: Basic` when the client authenticated with the header.

use actix_web::{
    HttpRequest, HttpResponse,
    http::{
        StatusCode,
        header::{self, HeaderValue},
    },
    web,
};
use base64::{Engine as _, engine::general_purpose::STANDARD};
use posture_domain::{
    Principal,
    credential::CredentialUse,
    oauth::{
        ASSERTION_TYPE, ClientForAuth, ClientSecretValue, OAuthError, TokenClaims, narrow_scopes,
        parse_client_id, verify_assertion,
    },
    rate_limit::RateBucket,
};
use serde_json::json;

use super::issuer::{TOKEN_PATH, issuer};
use crate::{
    client_ip::{request_bucket_name, request_client},
    error::ApiError,
    gate::{self, Counted},
    state::ApiState,
};

/// Largest form read.
const MAX_FORM_BYTES: usize = 16 * 1024;

/// The form's parameters posture reads (any other is ignored, RFC 6749 §3.2). No `Debug`:
/// it holds the secret or the assertion.
#[derive(Default)]
struct Form {
    grant_type: Option<String>,
    scope: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    client_assertion_type: Option<String>,
    client_assertion: Option<String>,
}

fn invalid_request(reason: impl Into<String>) -> OAuthError {
    OAuthError::InvalidRequest(reason.into())
}

impl Form {
    fn parse(req: &HttpRequest, body: &[u8]) -> Result<Self, OAuthError> {
        let form_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| {
                v.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            });
        if !form_type {
            return Err(invalid_request(
                "the body must be a form: Content-Type: application/x-www-form-urlencoded",
            ));
        }
        if body.len() > MAX_FORM_BYTES {
            return Err(invalid_request(format!(
                "the form is larger than {MAX_FORM_BYTES} bytes"
            )));
        }
        let mut form = Form::default();
        for (name, value) in form_urlencoded::parse(body) {
            let slot = match name.as_ref() {
                "grant_type" => &mut form.grant_type,
                "scope" => &mut form.scope,
                "client_id" => &mut form.client_id,
                "client_secret" => &mut form.client_secret,
                "client_assertion_type" => &mut form.client_assertion_type,
                "client_assertion" => &mut form.client_assertion,
                _ => continue,
            };
            // RFC 6749 §3.1: a parameter without a value is as if it were not sent.
            if value.is_empty() {
                continue;
            }
            if slot.is_some() {
                return Err(invalid_request(format!("{name} is given more than once")));
            }
            *slot = Some(value.into_owned());
        }
        Ok(form)
    }
}

/// How the client authenticates.
enum Authentication {
    /// A secret: from the `Authorization` header (`basic`) or the form.
    Secret {
        client_id: String,
        secret: String,
        basic: bool,
    },
    /// A signed JWT (`private_key_jwt`).
    Assertion {
        client_id: Option<String>,
        assertion: String,
    },
}

impl Authentication {
    fn basic(&self) -> bool {
        matches!(self, Authentication::Secret { basic: true, .. })
    }
}

/// A value of Basic authentication's pair, form-decoded (RFC 6749 §2.3.1), leniently: a
/// library that sends it raw sends the same text, as ids and secrets need no encoding.
fn form_decoded(text: &str) -> String {
    form_urlencoded::parse(text.as_bytes())
        .next()
        .map(|(name, _)| name.into_owned())
        .unwrap_or_default()
}

/// The client's authentication: exactly one way.
fn authentication(req: &HttpRequest, form: &mut Form) -> Result<Authentication, OAuthError> {
    let header = req.headers().get(header::AUTHORIZATION);
    let basic = match header {
        None => None,
        Some(value) => {
            let pair = value
                .to_str()
                .ok()
                .and_then(|v| v.split_once(' '))
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
                .and_then(|(_, encoded)| STANDARD.decode(encoded.trim()).ok())
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .and_then(|text| {
                    text.split_once(':')
                        .map(|(id, secret)| (form_decoded(id), form_decoded(secret)))
                });
            match pair {
                Some(pair) => Some(pair),
                None => {
                    return Err(OAuthError::InvalidClient(
                        "the Authorization header must be Basic with the client_id and \
                         client_secret"
                            .into(),
                    ));
                }
            }
        }
    };
    let assertion = form.client_assertion.take();
    let assertion_type = form.client_assertion_type.take();
    let posted = form.client_secret.take();
    let ways = [basic.is_some(), posted.is_some(), assertion.is_some()];
    if ways.iter().filter(|way| **way).count() > 1 {
        return Err(invalid_request(
            "use one way of authenticating the client: the Authorization header, \
             client_secret, or client_assertion",
        ));
    }
    if let Some((client_id, secret)) = basic {
        if form.client_id.as_ref().is_some_and(|id| *id != client_id) {
            return Err(invalid_request(
                "client_id differs from the Authorization header's",
            ));
        }
        return Ok(Authentication::Secret {
            client_id,
            secret,
            basic: true,
        });
    }
    if let Some(secret) = posted {
        let client_id = form
            .client_id
            .clone()
            .ok_or_else(|| invalid_request("client_secret needs client_id"))?;
        return Ok(Authentication::Secret {
            client_id,
            secret,
            basic: false,
        });
    }
    if let Some(assertion) = assertion {
        if assertion_type.as_deref() != Some(ASSERTION_TYPE) {
            return Err(invalid_request(format!(
                "client_assertion_type must be {ASSERTION_TYPE}"
            )));
        }
        return Ok(Authentication::Assertion {
            client_id: form.client_id.clone(),
            assertion,
        });
    }
    Err(OAuthError::InvalidClient(
        "the client must authenticate: with the Authorization header (Basic), \
         client_id and client_secret, or a client_assertion"
            .into(),
    ))
}

/// What the token endpoint answers instead of a token.
enum Refusal {
    OAuth {
        error: OAuthError,
        basic: bool,
    },
    /// Over a rate limit, or the store failing: the API's own answer.
    Api(ApiError),
}

impl From<ApiError> for Refusal {
    fn from(error: ApiError) -> Self {
        Refusal::Api(error)
    }
}

impl From<posture_domain::Error> for Refusal {
    fn from(error: posture_domain::Error) -> Self {
        Refusal::Api(error.into())
    }
}

fn refused(error: OAuthError, basic: bool) -> Refusal {
    Refusal::OAuth { error, basic }
}

/// The unknown-client refusal: says nothing of why (no such client, revoked, wrong secret).
fn unknown_client(basic: bool) -> Refusal {
    refused(
        OAuthError::InvalidClient(
            "the client is unknown or revoked, or its credential does not match".into(),
        ),
        basic,
    )
}

pub(super) async fn token(
    req: HttpRequest,
    body: web::Bytes,
    state: web::Data<ApiState>,
) -> HttpResponse {
    let mut counted: Option<Counted> = None;
    let answer = exchange(&req, &body, &state, &mut counted).await;
    let mut response = match answer {
        Ok(response) => response,
        Err(Refusal::Api(error)) => actix_web::ResponseError::error_response(&error),
        Err(Refusal::OAuth { error, basic }) => oauth_error(&error, basic),
    };
    if let Some(Counted {
        bucket,
        decision: Some(decision),
    }) = &counted
    {
        gate::set_headers(response.headers_mut(), bucket, decision);
    }
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

fn oauth_error(error: &OAuthError, basic: bool) -> HttpResponse {
    let unauthorized = basic && matches!(error, OAuthError::InvalidClient(_));
    let status = match unauthorized {
        true => StatusCode::UNAUTHORIZED,
        false => StatusCode::BAD_REQUEST,
    };
    let mut response = HttpResponse::build(status);
    if unauthorized {
        response.insert_header((
            header::WWW_AUTHENTICATE,
            "Basic realm=\"posture\", charset=\"UTF-8\"",
        ));
    }
    let reason = error.to_string();
    // RFC 6749 §5.2: `error_description` holds printable ASCII but `"` and `\`.
    let description: String = reason
        .chars()
        .map(|c| match c {
            ' ' | '!' | '#'..='[' | ']'..='~' => c,
            _ => '\'',
        })
        .collect();
    response.content_type("application/json").body(
        json!({"error": error.code(), "error_description": description, "reason": reason})
            .to_string(),
    )
}

/// Counts one request of `bucket` in `counted` (what the headers report); the refusal when
/// it is over its limit.
async fn spend(
    state: &ApiState,
    limiter: Option<&dyn posture_domain::rate_limit::RateLimiter>,
    bucket: RateBucket,
    counted: &mut Option<Counted>,
) -> Result<(), Refusal> {
    let spent = match limiter {
        Some(limiter) => gate::count_on(limiter, bucket).await,
        None => gate::count(state, bucket).await,
    };
    let over = spent.over_limit();
    *counted = Some(spent);
    match over {
        Some(error) => Err(error.into()),
        None => Ok(()),
    }
}

/// The client, if `authentication` proves it is one of posture's, unrevoked.
async fn authenticate(
    req: &HttpRequest,
    state: &ApiState,
    authentication: &Authentication,
) -> Result<Option<ClientForAuth>, Refusal> {
    let now = state.clock.now();
    // A client's id, or the assertion's `sub` (checked with its signature below) when the
    // form names none.
    let id_text = match authentication {
        Authentication::Secret { client_id, .. } => client_id.clone(),
        Authentication::Assertion {
            client_id: Some(id),
            ..
        } => id.clone(),
        Authentication::Assertion {
            client_id: None,
            assertion,
        } => assertion_subject(assertion).unwrap_or_default(),
    };
    let Some(id) = parse_client_id(&id_text) else {
        return Ok(None);
    };
    let Some(client) = state.ports.clients.client_for_auth(id).await? else {
        return Ok(None);
    };
    let proven = match authentication {
        Authentication::Secret { secret, .. } => ClientSecretValue::hash_presented(secret)
            .is_some_and(|hash| client.secret_matches(&hash, now)),
        Authentication::Assertion { assertion, .. } => {
            let issuer = issuer(req, state);
            let endpoint = format!("{issuer}{TOKEN_PATH}");
            let keys = client.public_keys(now);
            match verify_assertion(assertion, &id_text, &keys, &[&endpoint, &issuer], now) {
                Ok(claims) => {
                    let first_use = state
                        .ports
                        .clients
                        .remember_assertion(id, &claims.jti, claims.remember_until)
                        .await?;
                    if !first_use {
                        return Err(refused(
                            OAuthError::InvalidClient(
                                "this client_assertion was used before: sign a new one with \
                                 a new jti"
                                    .into(),
                            ),
                            false,
                        ));
                    }
                    true
                }
                Err(error) => {
                    tracing::debug!(client.id = %id, reason = %error, "client assertion refused");
                    return Err(refused(OAuthError::InvalidClient(error.to_string()), false));
                }
            }
        }
    };
    Ok(proven.then_some(client))
}

/// The `sub` of an assertion, read without verifying it (only to find whose keys verify
/// it; the verification then requires it to be the client id).
fn assertion_subject(assertion: &str) -> Option<String> {
    let claims = assertion.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims.trim_end_matches('='))
        .ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    value["sub"].as_str().map(str::to_owned)
}

async fn exchange(
    req: &HttpRequest,
    body: &[u8],
    state: &ApiState,
    counted: &mut Option<Counted>,
) -> Result<HttpResponse, Refusal> {
    let mut form = Form::parse(req, body).map_err(|error| refused(error, false))?;
    match form.grant_type.as_deref() {
        None => return Err(refused(invalid_request("grant_type is required"), false)),
        Some("client_credentials") => {}
        Some(_) => return Err(refused(OAuthError::UnsupportedGrantType, false)),
    }
    let authentication = authentication(req, &mut form)
        .map_err(|error| refused(error, req.headers().contains_key(header::AUTHORIZATION)))?;
    let basic = authentication.basic();
    let address = RateBucket::Address(request_bucket_name(req, &state.trusted_proxies));
    if !gate::has_budget(state, &address).await {
        spend(state, None, address.clone(), counted).await?;
    }
    let client = match authenticate(req, state, &authentication).await {
        Ok(Some(client)) => client,
        Ok(None) => {
            spend(state, None, address, counted).await?;
            return Err(unknown_client(basic));
        }
        Err(refusal) => {
            if matches!(refusal, Refusal::OAuth { .. }) {
                spend(state, None, address, counted).await?;
            }
            return Err(refusal);
        }
    };
    let now = state.clock.now();
    let principal = Principal::verified(client.id, client.customer_id, client.scopes)
        .allowed_from(client.allow_from.clone());
    // Proven, but unused longer than its customer allows: said (its use is not recorded,
    // which would bring it back).
    if let Some(reason) = &client.lapsed {
        state.ports.keys.record_lapsed(&principal, now);
        spend(state, None, address, counted).await?;
        return Err(refused(OAuthError::InvalidClient(reason.clone()), basic));
    }
    let from = request_client(req, &state.trusted_proxies);
    if !principal.permits(from) {
        if let Some(from) = from {
            state.ports.keys.record_refusal(&principal, from, now);
        }
        spend(state, None, address, counted).await?;
        return Err(refused(OAuthError::UnauthorizedClient, false));
    }
    spend(
        state,
        Some(state.budgets.token_requests.as_ref()),
        RateBucket::ClientTokens(client.id),
        counted,
    )
    .await?;
    let scopes = narrow_scopes(form.scope.as_deref(), client.scopes)
        .map_err(|error| refused(error, false))?;
    if let Some(from) = from {
        let agent = req
            .headers()
            .get(header::USER_AGENT)
            .and_then(|value| value.to_str().ok());
        state.ports.keys.record_use(&principal, now, from, agent);
        let used = CredentialUse::new(now, from, agent);
        state.ports.keys.record_tokens_issued(&principal, used);
    }
    let lifetime = state.token_lifetime;
    let claims = TokenClaims {
        client: client.id,
        scopes,
        expires_at: chrono::DateTime::from_timestamp((now + lifetime).timestamp(), 0)
            .unwrap_or(now + lifetime),
    };
    let token = state.keyring.token_keys().issue(&claims);
    let body = json!({
        "access_token": token.expose(),
        "token_type": "Bearer",
        "expires_in": lifetime.num_seconds(),
        "scope": scopes.to_oauth(),
    });
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(body.to_string()))
}
