//! Signing in with the customer's identity provider, and signing out.
//!
//! `GET sign-in` keeps a pending sign-in (state, nonce, PKCE verifier) under the hash of a
//! random binding sent to the browser in a cookie only the callback receives, and redirects
//! to the provider. `GET callback` takes that pending sign-in (single use, ten minutes),
//! checks `state`, redeems the code, verifies the ID token, applies the admin rule (or, when
//! the customer requires provisioning, matches a provisioned admin), and starts a new
//! session (a new token whatever the browser held before). Both count against
//! the client address's sign-in limit.

use actix_web::{HttpRequest, HttpResponse, http::header, web};
use posture_domain::{
    CustomerId, CustomerScope,
    console::{
        Admission, NewSession, PendingSignIn, Provisioning, SsoConfig, issuer_host, random_token,
        same_secret, token_hash,
    },
    ports::SignInError,
    rate_limit::RateBucket,
};
use posture_http::client_ip::{request_bucket_name, request_client};
use serde::Deserialize;

use crate::{
    ConsoleError, ConsoleState, PREFIX,
    pages::{self, Viewer},
    session::{self, Signed, session_cookie, sign_in_cookie},
};

/// Longest `code`, `state` or `error` value read from the provider's redirect.
const MAX_CALLBACK_VALUE: usize = 4096;

fn callback_uri(req: &HttpRequest, state: &ConsoleState, customer: CustomerId) -> String {
    format!(
        "{}{}",
        session::base_url(req, state),
        session::callback_path(customer)
    )
}

async fn count_attempt(req: &HttpRequest, state: &ConsoleState) -> Result<(), ConsoleError> {
    let bucket = RateBucket::SignIn(request_bucket_name(req, &state.trusted_proxies));
    let decision = state.ports.sign_in_limiter.check(&bucket).await?;
    if decision.allowed {
        Ok(())
    } else {
        Err(ConsoleError::TooManySignIns {
            retry_after: decision.retry_after,
        })
    }
}

#[derive(Deserialize)]
pub struct SignInPageQuery {
    #[serde(rename = "signed-out")]
    signed_out: Option<String>,
}

/// The customer's sign-in page (or the keys, for a signed-in admin).
pub async fn sign_in_page(
    req: HttpRequest,
    state: web::Data<ConsoleState>,
    path: web::Path<String>,
    query: web::Query<SignInPageQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let customer = session::customer(&path)?;
    let setup = session::setup(&state, customer).await?;
    if session::current(&req, &state, customer).await?.is_some() {
        return Ok(session::redirect(format!("{PREFIX}/{customer}/keys")));
    }
    let provider = setup.sso.provider_name();
    let customer_text = customer.to_string();
    let viewer = Viewer {
        customer_id: &customer_text,
        customer_name: &setup.customer_name,
        admin: None,
    };
    let notice = query.signed_out.as_ref().map(|_| "You have signed out.");
    Ok(pages::html_page(pages::sign_in(&viewer, &provider, notice)))
}

/// Starts a sign-in: to the identity provider.
pub async fn start(
    req: HttpRequest,
    state: web::Data<ConsoleState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    let customer = session::customer(&path)?;
    count_attempt(&req, &state)
        .await
        .map_err(|e| e.of_sign_in(customer.to_string(), None))?;
    let setup = session::setup(&state, customer).await?;
    let of_sign_in =
        |e: ConsoleError| e.of_sign_in(customer.to_string(), Some(setup.customer_name.clone()));
    let redirect_uri = callback_uri(&req, &state, customer);
    let started = state
        .ports
        .sign_in
        .start_sign_in(&setup.sso, &redirect_uri)
        .await
        .map_err(|e| of_sign_in(provider_error(&setup.sso, e)))?;
    let binding = random_token(32).map_err(|e| of_sign_in(e.into()))?;
    state
        .ports
        .console
        .begin_sign_in(
            CustomerScope::for_sign_in(customer),
            token_hash(&binding),
            &started.pending,
        )
        .await
        .map_err(|e| of_sign_in(e.into()))?;
    let secure = session::secure(&req, &state);
    let mut binding_cookie = session::cookie(
        sign_in_cookie(secure),
        &binding,
        session::callback_path(customer),
        secure,
    );
    binding_cookie.set_max_age(actix_web::cookie::time::Duration::seconds(
        posture_domain::console::SIGN_IN_LIFETIME.as_secs() as i64,
    ));
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, started.authorize_url))
        .cookie(binding_cookie)
        .finish())
}

fn provider_error(sso: &SsoConfig, e: SignInError) -> ConsoleError {
    match e {
        SignInError::Provider(cause) => ConsoleError::ProviderUnavailable {
            provider: match &sso.display_name {
                Some(name) => format!("{name}, at {}", issuer_host(&sso.issuer)),
                None => issuer_host(&sso.issuer),
            },
            cause,
        },
        SignInError::Rejected(cause) => {
            tracing::warn!(cause = %cause, "console: a sign-in did not verify");
            ConsoleError::BadRequest(
                "Your identity provider's answer could not be verified, so you are not signed \
                 in. Start again from your console's sign-in page."
                    .to_owned(),
            )
        }
    }
}

#[derive(Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

fn expired_sign_in() -> ConsoleError {
    ConsoleError::BadRequest(
        "This sign-in has expired, was already used, or was started in another browser. \
         Start again from your console's sign-in page."
            .to_owned(),
    )
}

/// The provider's redirect back: verify, check the admin rule, start a session.
pub async fn callback(
    req: HttpRequest,
    state: web::Data<ConsoleState>,
    path: web::Path<String>,
    query: web::Query<CallbackQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let customer = session::customer(&path)?;
    count_attempt(&req, &state)
        .await
        .map_err(|e| e.of_sign_in(customer.to_string(), None))?;
    let setup = session::setup(&state, customer).await?;
    let of_sign_in =
        |e: ConsoleError| e.of_sign_in(customer.to_string(), Some(setup.customer_name.clone()));
    let (code, returned_state) = provider_answer(query.into_inner()).map_err(of_sign_in)?;
    let pending = pending_sign_in(&req, &state, customer, &returned_state)
        .await
        .map_err(of_sign_in)?;
    let secret = state
        .keyring
        .open_client_secret(&setup.sealed_secret, customer)
        .map_err(|e| of_sign_in(e.into()))?;
    let user = state
        .ports
        .sign_in
        .finish_sign_in(
            &setup.sso,
            &secret,
            &callback_uri(&req, &state, customer),
            &code,
            &pending,
        )
        .await
        .map_err(|e| of_sign_in(provider_error(&setup.sso, e)))?;
    let mut new = NewSession::start(customer, &user, state.sessions, state.clock.now())?;
    new.admitted_under = Some(setup.sso.updated_at);
    new.from = request_client(&req, &state.trusted_proxies);
    let replaces = session::presented_token(&req, &state).map(|t| t.hash());
    let refusal = match &setup.sso.provisioning {
        None if setup.sso.admins.admits(&user.subject, &user.claims) => {
            state
                .ports
                .console
                .create_session(&new, replaces)
                .await
                .map_err(|e| of_sign_in(stored(e)))?;
            None
        }
        None => Some(Admission::NotAdmin),
        Some(provisioning) => match provisioning.sign_in(&user.claims) {
            Some(matched) => match state
                .ports
                .console
                .create_provisioned_session(&new, replaces, &matched)
                .await
                .map_err(|e| of_sign_in(stored(e)))?
            {
                Admission::Admitted => None,
                refused => Some(refused),
            },
            None => Some(Admission::NotProvisioned),
        },
    };
    if let Some(refused) = refusal {
        tracing::info!(customer = %customer, subject = %user.subject, admission = ?refused, "console: sign-in refused");
        let who = posture_domain::console::Actor::Admin {
            subject: user.subject.clone(),
            name: user.display_name.clone(),
            from: new.from,
        };
        state
            .ports
            .console
            .record_refused_sign_in(
                CustomerScope::for_sign_in(customer),
                &who,
                refused_title(refused),
            )
            .await
            .map_err(|e| of_sign_in(e.into()))?;
        let detail = refused_detail(
            refused,
            &user.display_name,
            &setup.customer_name,
            setup.sso.provisioning.as_ref(),
        );
        return Err(of_sign_in(ConsoleError::Forbidden {
            title: refused_title(refused).to_owned(),
            detail,
        }));
    }
    tracing::info!(customer = %customer, subject = %user.subject, "console: admin signed in");
    Ok(signed_in(&req, &state, customer, &new))
}

/// A session that could not be stored: the settings it was admitted under changed meanwhile
/// (the change ended every session), said in words.
fn stored(e: posture_domain::Error) -> ConsoleError {
    match e {
        posture_domain::Error::PreconditionFailed(_) => ConsoleError::BadRequest(
            "Your organisation's sign-in settings changed while you were signing in, so you \
             are not signed in. Start again from your console's sign-in page."
                .to_owned(),
        ),
        other => other.into(),
    }
}

fn refused_title(refused: Admission) -> &'static str {
    match refused {
        Admission::NotProvisioned => "You are not provisioned for this organisation",
        Admission::Deactivated => "Your account is deactivated",
        Admission::Admitted | Admission::NotAdmin => "You are not an admin of this organisation",
    }
}

/// Why a sign-in ended without a session, in words: what the user can do about it.
fn refused_detail(
    refused: Admission,
    user: &str,
    customer: &str,
    provisioning: Option<&Provisioning>,
) -> String {
    let signed_in = format!("You are signed in to your identity provider as {user}");
    let ask = "Ask your identity provider's administrator";
    match (refused, provisioning) {
        (Admission::NotProvisioned, Some(p)) => format!(
            "{signed_in}, but {customer} lets only the people its identity provider provisions \
             to posture sign in, matched by the {:?} claim of your sign-in, and none matches \
             yours. {ask} to assign you to posture.",
            p.claim
        ),
        (Admission::Deactivated, _) => format!(
            "{signed_in}, but your identity provider has deactivated your access to posture \
             for {customer}. {ask} if this is a mistake."
        ),
        (_, Some(p)) => format!(
            "{signed_in}, but admins of {customer} in posture are the members of the group \
             {:?}, and you are not one. Ask an admin of your organisation to issue the key you \
             need, or ask your identity provider's administrator for admin access.",
            p.admin_group
        ),
        (_, None) => format!(
            "{signed_in}, but you are not an admin of {customer} in posture. Ask an admin of \
             your organisation to issue the key you need, or ask your identity provider's \
             administrator for admin access."
        ),
    }
}

/// The code and state of the provider's answer; an error the provider reports, or an answer
/// that is not one, is a page in words (the error's text reduced to a token).
fn provider_answer(query: CallbackQuery) -> Result<(String, String), ConsoleError> {
    let too_long = [&query.code, &query.state, &query.error]
        .into_iter()
        .flatten()
        .any(|v| v.len() > MAX_CALLBACK_VALUE);
    if too_long {
        return Err(expired_sign_in());
    }
    if let Some(error) = &query.error {
        let error: String = error
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(64)
            .collect();
        return Err(ConsoleError::BadRequest(format!(
            "Your identity provider did not sign you in ({error}). Start again from your \
             console's sign-in page."
        )));
    }
    match (query.code, query.state) {
        (Some(code), Some(state)) => Ok((code, state)),
        _ => Err(expired_sign_in()),
    }
}

/// The sign-in this browser started (its binding cookie), taken once, if the provider
/// returned its state.
async fn pending_sign_in(
    req: &HttpRequest,
    state: &ConsoleState,
    customer: CustomerId,
    returned_state: &str,
) -> Result<PendingSignIn, ConsoleError> {
    let binding = req
        .cookie(sign_in_cookie(session::secure(req, state)))
        .map(|c| c.value().to_owned())
        .ok_or_else(expired_sign_in)?;
    let pending = state
        .ports
        .console
        .take_sign_in(CustomerScope::for_sign_in(customer), token_hash(&binding))
        .await?
        .ok_or_else(expired_sign_in)?;
    if !same_secret(&pending.state, returned_state) {
        return Err(expired_sign_in());
    }
    Ok(pending)
}

/// The redirect to the keys page with the new session's cookie, the sign-in's cookie
/// removed.
fn signed_in(
    req: &HttpRequest,
    state: &ConsoleState,
    customer: CustomerId,
    new: &NewSession,
) -> HttpResponse {
    let secure = session::secure(req, state);
    let mut session_cookie = session::cookie(
        session_cookie(secure),
        new.token.expose(),
        session::console_path(customer),
        secure,
    );
    session_cookie.set_max_age(actix_web::cookie::time::Duration::seconds(
        state.sessions.absolute.as_secs() as i64,
    ));
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("{PREFIX}/{customer}/keys")))
        .cookie(session_cookie)
        .cookie(session::removal(
            sign_in_cookie(secure),
            session::callback_path(customer),
            secure,
        ))
        .finish()
}

/// Ends the session here and in the database.
pub async fn sign_out(
    signed: Signed,
    req: HttpRequest,
    state: web::Data<ConsoleState>,
    body: web::Bytes,
) -> Result<HttpResponse, ConsoleError> {
    session::checked_form(&body, &signed)?;
    state
        .ports
        .console
        .end_session(signed.session.scope(), signed.token_hash)
        .await?;
    tracing::info!(customer = %signed.customer, subject = %signed.session.subject, "console: admin signed out");
    Ok(HttpResponse::SeeOther()
        .insert_header((
            header::LOCATION,
            format!("{PREFIX}/{}/?signed-out=1", signed.customer),
        ))
        .cookie(session::removal(
            session_cookie(session::secure(&req, &state)),
            session::console_path(signed.customer),
            session::secure(&req, &state),
        ))
        .finish())
}
