//! Sessions in cookies, CSRF-checked forms, and what a request says about where it came from.

use std::{future::Future, pin::Pin};

use actix_web::{
    FromRequest, HttpRequest,
    cookie::{Cookie, SameSite, time::Duration as CookieDuration},
    dev::Payload,
    web,
};
use posture_domain::{
    CustomerId, CustomerScope,
    console::{ConsoleSession, SessionToken},
    ports::ConsoleSetup,
};

use crate::{ConsoleError, ConsoleState, PREFIX, pages::Viewer};

/// The session cookie (its path is the customer's console): `__Secure-posture_session` when
/// it is `Secure` (a browser then accepts it only from a secure origin, with the flag, so a
/// plain-HTTP page of the same host cannot plant one), `posture_session` over plain HTTP
/// (development). Not `__Host-`: that prefix requires `Path=/`, and the cookie is scoped to
/// its customer's console.
pub fn session_cookie(secure: bool) -> &'static str {
    if secure {
        "__Secure-posture_session"
    } else {
        "posture_session"
    }
}

/// The cookie binding a sign-in to the browser that started it (path: the callback), named
/// like [`session_cookie`].
pub fn sign_in_cookie(secure: bool) -> &'static str {
    if secure {
        "__Secure-posture_sign_in"
    } else {
        "posture_sign_in"
    }
}

/// The customer named by the path; a malformed id is simply a page that does not exist.
pub fn customer(path: &str) -> Result<CustomerId, ConsoleError> {
    path.parse().map_err(|_| ConsoleError::NotFound)
}

/// The customer's console setup; customers without one have no console.
pub async fn setup(
    state: &ConsoleState,
    customer: CustomerId,
) -> Result<ConsoleSetup, ConsoleError> {
    state
        .ports
        .console
        .console_setup(CustomerScope::for_sign_in(customer))
        .await?
        .ok_or(ConsoleError::NotFound)
}

/// The scheme and host the browser used: the connection's own (the `Host` header), or what
/// a trusted proxy forwarded. Forwarding headers from anyone else are the client's own words:
/// a `Forwarded: host=evil.example` must not choose where a sign-in returns to.
fn seen_from_browser(req: &HttpRequest, state: &ConsoleState) -> (String, String) {
    posture_http::client_ip::request_origin(req, &state.trusted_proxies)
}

/// Whether cookies set on this request are `Secure`.
pub fn secure(req: &HttpRequest, state: &ConsoleState) -> bool {
    state.secure_cookies || seen_from_browser(req, state).0 == "https"
}

/// The base URL of the service as the browser sees it: `POSTURE_PUBLIC_URL` (which `serve`
/// requires unless it listens on loopback only).
pub fn base_url(req: &HttpRequest, state: &ConsoleState) -> String {
    match &state.public_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => {
            let (scheme, host) = seen_from_browser(req, state);
            format!("{scheme}://{host}")
        }
    }
}

/// A cookie of the console: HttpOnly, SameSite=Lax, `Secure` when [`secure`].
pub fn cookie<'a>(name: &'a str, value: &'a str, path: String, secure: bool) -> Cookie<'a> {
    Cookie::build(name, value)
        .path(path)
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(secure)
        .finish()
}

/// A cookie that removes `name` at `path`.
pub fn removal(name: &str, path: String, secure: bool) -> Cookie<'_> {
    let mut c = cookie(name, "", path, secure);
    c.set_max_age(CookieDuration::ZERO);
    c
}

/// A `303 See Other` to `location`.
pub fn redirect(location: String) -> actix_web::HttpResponse {
    actix_web::HttpResponse::SeeOther()
        .insert_header((actix_web::http::header::LOCATION, location))
        .finish()
}

/// The path of a customer's sign-in callback, where the sign-in cookie lives.
pub fn callback_path(customer: CustomerId) -> String {
    format!("{PREFIX}/{customer}/callback")
}

/// The path of a customer's console, where its session cookie lives.
pub fn console_path(customer: CustomerId) -> String {
    format!("{PREFIX}/{customer}/")
}

/// The token of the session cookie, if it has the form of one.
pub fn presented_token(req: &HttpRequest, state: &ConsoleState) -> Option<SessionToken> {
    req.cookie(session_cookie(secure(req, state)))
        .and_then(|c| SessionToken::presented(c.value()))
}

/// A signed-in admin on one of their customer's pages.
pub struct Signed {
    pub session: ConsoleSession,
    pub token_hash: [u8; 32],
    pub setup: ConsoleSetup,
    pub customer: CustomerId,
    /// The customer id as text, for links.
    pub customer_text: String,
    /// The admin's address (behind the trusted proxies, the one they forward), for the
    /// audit log.
    pub from: Option<std::net::IpAddr>,
}

impl Signed {
    /// The admin as the audit log records them: with the address of this request.
    pub fn actor(&self) -> posture_domain::console::Actor {
        let actor = self.session.actor();
        match self.from {
            Some(from) => actor.from(from),
            None => actor,
        }
    }

    pub fn viewer(&self) -> Viewer<'_> {
        Viewer {
            customer_id: &self.customer_text,
            customer_name: &self.setup.customer_name,
            admin: Some((&self.session.display_name, &self.session.csrf_token)),
        }
    }
}

/// The live session this request presents for `customer`, if any.
pub async fn current(
    req: &HttpRequest,
    state: &ConsoleState,
    customer: CustomerId,
) -> Result<Option<(ConsoleSession, [u8; 32])>, ConsoleError> {
    let Some(token) = presented_token(req, state) else {
        return Ok(None);
    };
    let token_hash = token.hash();
    let session = state
        .ports
        .console
        .live_session(
            CustomerScope::for_sign_in(customer),
            token_hash,
            state.sessions,
        )
        .await?;
    Ok(session.map(|session| (session, token_hash)))
}

/// The live session of this customer's console, or a redirect to its sign-in page.
pub async fn require(
    req: &HttpRequest,
    state: &ConsoleState,
    customer_path: &str,
) -> Result<Signed, ConsoleError> {
    let customer = customer(customer_path)?;
    let setup = setup(state, customer).await?;
    let (session, token_hash) =
        current(req, state, customer)
            .await?
            .ok_or_else(|| ConsoleError::SignInRequired {
                customer: customer.to_string(),
            })?;
    Ok(Signed {
        session,
        token_hash,
        setup,
        customer,
        customer_text: customer.to_string(),
        from: posture_http::client_ip::request_client(req, &state.trusted_proxies),
    })
}

/// A handler that takes [`Signed`] runs only for a live session of the customer its path
/// names (`{customer}`); otherwise the console answers as [`require`] does (the sign-in
/// page). Every signed-in page and form says so in its signature, once.
impl FromRequest for Signed {
    type Error = ConsoleError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ConsoleError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = req
                .app_data::<web::Data<ConsoleState>>()
                .cloned()
                .ok_or_else(|| {
                    ConsoleError::Internal("the console's state is not mounted".into())
                })?;
            let customer = req
                .match_info()
                .get("customer")
                .unwrap_or_default()
                .to_owned();
            require(&req, &state, &customer).await
        })
    }
}

/// The fields of a urlencoded form (the first 64), checked for the session's CSRF token.
/// The body is bounded by the console's `PayloadConfig` (16 KiB) before it gets here.
pub fn checked_form(
    body: &web::Bytes,
    signed: &Signed,
) -> Result<Vec<(String, String)>, ConsoleError> {
    let fields: Vec<(String, String)> = form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .take(64)
        .collect();
    let csrf = fields
        .iter()
        .find(|(k, _)| k == "csrf")
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    if !signed.session.csrf_matches(csrf) {
        return Err(ConsoleError::BadRequest(
            "This form has expired or did not come from this console (its security token is \
             missing or wrong). Reload the page and try again."
                .to_owned(),
        ));
    }
    Ok(fields)
}
