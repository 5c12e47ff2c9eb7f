//! The console's OpenID Connect relying party (the `openidconnect` crate): the authorization
//! code flow with PKCE (S256), `state` and `nonce`, against each customer's own provider.
//!
//! Every sign-in discovers the provider afresh (`<issuer>/.well-known/openid-configuration`
//! and its keys), so a provider's key rotation or a changed configuration takes effect at
//! once; sign-ins are rare and rate-limited, so the two extra requests cost little.
//!
//! The issuer is the operator's choice, but the discovery document is the customer's
//! provider's, and it names where posture goes next (`jwks_uri`, `token_endpoint`, which
//! receives the client secret). So every request goes through `posture-egress`, as webhooks
//! do: to https URLs only (http only when the operator set an `http://` loopback issuer, for
//! development), to public addresses or the networks the operator listed for a provider
//! inside the company (`POSTURE_SSO_ALLOWED_NETWORKS`), to the address that was checked, with
//! no redirects (the `openidconnect` crate's advice against SSRF), 10 seconds per request and
//! a bounded answer.

use std::{future::Future, pin::Pin, time::Duration};

use async_trait::async_trait;
use openidconnect::{
    AdditionalClaims, AsyncHttpClient, AuthenticationFlow, AuthorizationCode, Client, ClientId,
    CsrfToken, EmptyExtraTokenFields, EndpointMaybeSet, EndpointNotSet, EndpointSet, HttpRequest,
    HttpResponse, IdTokenFields, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, Scope, StandardErrorResponse, StandardTokenResponse, TokenResponse as _,
    core::{
        CoreAuthDisplay, CoreAuthPrompt, CoreErrorResponseType, CoreGenderClaim, CoreJsonWebKey,
        CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreProviderMetadata,
        CoreResponseType, CoreRevocableToken, CoreRevocationErrorResponse,
        CoreTokenIntrospectionResponse, CoreTokenType,
    },
};
use posture_domain::{
    console::{ClientSecret, PendingSignIn, SignInStart, SignedInUser, SsoConfig},
    egress::EgressPolicy,
    outside,
    ports::{SignInError, SignInProvider},
};
use serde::{Deserialize, Serialize};

/// Longest the relying party waits for one request to the provider.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest `sub` claim accepted (OpenID Connect Core: at most 255 ASCII characters).
const MAX_SUBJECT_BYTES: usize = 255;

/// Longest display name kept, in bytes.
const MAX_DISPLAY_NAME_BYTES: usize = 200;

/// Largest answer read from a provider (discovery documents and key sets are a few KiB).
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Why a request to the provider failed.
#[derive(Debug, thiserror::Error)]
enum HttpError {
    #[error(transparent)]
    Request(#[from] reqwest::Error),
    #[error(transparent)]
    Refused(#[from] posture_egress::UrlRefused),
    #[error("the answer is larger than {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
    #[error(transparent)]
    Http(#[from] openidconnect::http::Error),
}

/// `openidconnect`'s HTTP client interface on posture's guarded reqwest, with every URL
/// checked (the discovery document's included) and a bounded body.
struct Http<'a> {
    client: &'a reqwest::Client,
    policy: &'a EgressPolicy,
    /// The operator set an `http://` issuer (loopback, development): http is allowed.
    http: bool,
}

impl<'c> AsyncHttpClient<'c> for Http<'_> {
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(async move {
            posture_egress::check_url(&request.uri().to_string(), self.policy, self.http)?;
            let request = reqwest::Request::try_from(request)?;
            let mut response = self.client.execute(request).await?;
            let mut answer = openidconnect::http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                answer = answer.header(name, value);
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(HttpError::TooLarge);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(answer.body(body)?)
        })
    }
}

/// Every claim of the ID token beyond the standard ones (the admin rule reads them).
#[derive(Clone, Debug, Deserialize, Serialize)]
struct OtherClaims {
    #[serde(flatten)]
    claims: serde_json::Map<String, serde_json::Value>,
}

impl AdditionalClaims for OtherClaims {}

type IdTokenResponse = StandardTokenResponse<
    IdTokenFields<
        OtherClaims,
        EmptyExtraTokenFields,
        CoreGenderClaim,
        CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    >,
    CoreTokenType,
>;

type RelyingParty = Client<
    OtherClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    IdTokenResponse,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// The relying party of every customer's provider.
#[derive(Clone)]
pub struct OidcSignIn {
    http: reqwest::Client,
    policy: EgressPolicy,
}

impl OidcSignIn {
    /// A relying party that connects where `policy` permits (public addresses, and the
    /// networks the operator listed).
    pub fn new(policy: EgressPolicy) -> Result<Self, reqwest::Error> {
        let agent = concat!("posture-console/", env!("CARGO_PKG_VERSION"));
        let http = posture_egress::client(policy.clone(), REQUEST_TIMEOUT, agent)?;
        Ok(Self { http, policy })
    }

    fn http(&self, issuer: &str) -> Http<'_> {
        Http {
            client: &self.http,
            policy: &self.policy,
            http: issuer.starts_with("http://"),
        }
    }

    /// Whether `issuer` answers as an OpenID Connect provider: its discovery document is
    /// fetched (through the same egress rules as a sign-in) and read. `customers sso set`
    /// asks before saving, so a wrong issuer fails at set-up rather than at an admin's
    /// first sign-in.
    pub async fn check_issuer(&self, issuer: &str) -> Result<(), SignInError> {
        let url = IssuerUrl::new(issuer.to_owned())
            .map_err(|e| SignInError::Provider(format!("issuer URL: {e}")))?;
        CoreProviderMetadata::discover_async(url, &self.http(issuer))
            .await
            .map_err(|e| SignInError::Provider(format!("discovery: {}", chain(&e))))?;
        Ok(())
    }

    async fn relying_party(
        &self,
        sso: &SsoConfig,
        secret: Option<&ClientSecret>,
        redirect_uri: &str,
    ) -> Result<RelyingParty, SignInError> {
        let issuer = IssuerUrl::new(sso.issuer.clone())
            .map_err(|e| SignInError::Provider(format!("issuer URL: {e}")))?;
        let metadata = CoreProviderMetadata::discover_async(issuer, &self.http(&sso.issuer))
            .await
            .map_err(|e| SignInError::Provider(format!("discovery: {}", chain(&e))))?;
        let redirect = RedirectUrl::new(redirect_uri.to_owned())
            .map_err(|e| SignInError::Provider(format!("redirect URI: {e}")))?;
        Ok(RelyingParty::from_provider_metadata(
            metadata,
            ClientId::new(sso.client_id.clone()),
            secret.map(|s| openidconnect::ClientSecret::new(s.expose().to_owned())),
        )
        .set_redirect_uri(redirect))
    }
}

/// An error and its causes, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

#[async_trait]
impl SignInProvider for OidcSignIn {
    async fn start_sign_in(
        &self,
        sso: &SsoConfig,
        redirect_uri: &str,
    ) -> Result<SignInStart, SignInError> {
        let client = self.relying_party(sso, None, redirect_uri).await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state, nonce) = client
            .authorize_url(
                AuthenticationFlow::<CoreResponseType>::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .add_scope(Scope::new("profile".to_owned()))
            .add_scope(Scope::new("email".to_owned()))
            .set_pkce_challenge(challenge)
            .url();
        Ok(SignInStart {
            authorize_url: url.to_string(),
            pending: PendingSignIn {
                state: state.secret().clone(),
                nonce: nonce.secret().clone(),
                pkce_verifier: verifier.secret().clone(),
            },
        })
    }

    async fn finish_sign_in(
        &self,
        sso: &SsoConfig,
        secret: &ClientSecret,
        redirect_uri: &str,
        code: &str,
        pending: &PendingSignIn,
    ) -> Result<SignedInUser, SignInError> {
        let client = self.relying_party(sso, Some(secret), redirect_uri).await?;
        let token = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|e| SignInError::Provider(format!("token endpoint: {e}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier.clone()))
            .request_async(&self.http(&sso.issuer))
            .await
            .map_err(|e| SignInError::Rejected(format!("code exchange: {}", chain(&e))))?;
        let id_token = token
            .id_token()
            .ok_or_else(|| SignInError::Rejected("no ID token in the token response".into()))?;
        let claims = id_token
            .claims(
                &client.id_token_verifier(),
                &Nonce::new(pending.nonce.clone()),
            )
            .map_err(|e| SignInError::Rejected(format!("ID token: {}", chain(&e))))?;
        let subject = claims.subject().to_string();
        // The provider's claims are outside text: `sub` must be an identifier (OpenID
        // Connect: at most 255 ASCII characters; a control character, NUL included, could
        // neither be stored nor logged), the display name is cleaned and falls back to it.
        if subject.is_empty()
            || subject.len() > MAX_SUBJECT_BYTES
            || subject.chars().any(char::is_control)
        {
            return Err(SignInError::Rejected(
                "the ID token's sub claim is not a usable identifier".into(),
            ));
        }
        let display_name = [
            claims
                .name()
                .and_then(|n| n.get(None))
                .map(|n| n.to_string()),
            claims.preferred_username().map(|u| u.to_string()),
            claims.email().map(|e| e.to_string()),
        ]
        .into_iter()
        .flatten()
        .map(|name| outside::one_line(&name, MAX_DISPLAY_NAME_BYTES))
        .find(|name| !name.is_empty())
        .unwrap_or_else(|| subject.clone());
        // The standard claims a customer requiring provisioning may match a provisioned
        // userName by join the others (the library parses them apart). An e-mail address
        // the provider does not say it verified (`email_verified: true`) is left out: on
        // some providers (Entra ID) users or apps can set it, so it would name anyone.
        let mut other = claims.additional_claims().claims.clone();
        if let Some(email) = claims.email()
            && claims.email_verified() == Some(true)
        {
            other.insert("email".to_owned(), email.to_string().into());
        }
        if let Some(username) = claims.preferred_username() {
            other.insert("preferred_username".to_owned(), username.to_string().into());
        }
        Ok(SignedInUser {
            subject,
            display_name,
            claims: other,
        })
    }
}
