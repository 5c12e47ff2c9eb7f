//! The customer console (docs/console.md): server-rendered pages under `/console/` where a
//! customer's admins, signed in with their own OpenID Connect provider, issue and revoke
//! their organisation's API keys, read the audit log of who did so, see and end their
//! organisation's console sessions, and see the users and groups its identity provider
//! provisioned over SCIM.
//!
//! No bearer keys here: a signed-in admin holds a session cookie (HttpOnly, SameSite=Lax,
//! Secure over TLS, scoped to the customer's path), every form carries the session's CSRF
//! token, and every page is sent with a `Content-Security-Policy` that allows no inline
//! script and no framing. Pages are [maud](https://maud.lambda.xyz) templates, checked at
//! compile time; the stylesheet and the one small script are compiled into the binary.
//!
//! Like the API, this crate calls the domain's ports only; the binary wires the adapters.

mod assets;
mod directory;
mod error;
mod keys;
mod pages;
mod paging;
mod session;
mod sessions;
mod sign_in;
mod throttle;

use std::sync::Arc;

use actix_web::{
    http::header::{self, HeaderName},
    middleware::{DefaultHeaders, from_fn},
    web,
};
use posture_domain::{
    console::SessionPolicy,
    ports::{ApiKeyRepository, ConsoleRepository, ScimRepository, SignInProvider},
    rate_limit::RateLimiter,
    secrets::Keyring,
};
use posture_http::TrustedProxies;

pub use error::ConsoleError;

/// Where the console is served.
pub const PREFIX: &str = "/console";

/// What the console's handlers call.
#[derive(Clone)]
pub struct ConsolePorts {
    pub keys: Arc<dyn ApiKeyRepository>,
    pub console: Arc<dyn ConsoleRepository>,
    /// The users and groups provisioned over SCIM (read only here).
    pub scim: Arc<dyn ScimRepository>,
    pub sign_in: Arc<dyn SignInProvider>,
    /// Counts sign-in attempts per client address (its own policy, apart from the API's).
    pub sign_in_limiter: Arc<dyn RateLimiter>,
    /// The API's limiter: every console request but the assets counts against its client
    /// address's budget.
    pub request_limiter: Arc<dyn RateLimiter>,
}

/// Shared state of the console.
#[derive(Clone)]
pub struct ConsoleState {
    pub ports: ConsolePorts,
    /// Opens the customers' sealed client secrets.
    pub keyring: Arc<Keyring>,
    pub sessions: SessionPolicy,
    /// The service's public base URL (`https://posture.example.com`), from which redirect
    /// URIs are built; `None`: from each request's scheme and `Host`.
    pub public_url: Option<String>,
    /// Cookies are `Secure` even on requests that arrived over plain HTTP (TLS ends at a
    /// proxy). They are always `Secure` on HTTPS requests.
    pub secure_cookies: bool,
    /// Proxies whose `X-Forwarded-For` names the client (for the sign-in limit).
    pub trusted_proxies: TrustedProxies,
    /// What time it is: the store's clock (sessions' lifetimes, keys' expiry).
    pub clock: std::sync::Arc<dyn posture_domain::clock::Clock>,
}

/// The policy every console response carries: scripts and styles from posture only, no
/// inline script, no framing, forms posted to posture only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'none'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// A route template and the route that answers it.
type Mount = (&'static str, fn() -> actix_web::Route);

/// The console's routes under [`PREFIX`]: each template with the route that answers it.
/// The one list: [`configure`] mounts it, and [`routes`] (the templates the access log and
/// the metrics name its requests by) is read from it.
const TABLE: &[Mount] = &[
    ("/", || web::get().to(pages::landing)),
    ("/assets/{file}", || web::get().to(assets::serve)),
    ("/{customer}", || web::get().to(sign_in::sign_in_page)),
    ("/{customer}/", || web::get().to(sign_in::sign_in_page)),
    ("/{customer}/sign-in", || web::get().to(sign_in::start)),
    ("/{customer}/callback", || web::get().to(sign_in::callback)),
    ("/{customer}/sign-out", || web::post().to(sign_in::sign_out)),
    ("/{customer}/keys", || web::get().to(keys::list)),
    ("/{customer}/keys", || web::post().to(keys::issue)),
    ("/{customer}/keys/{key}/revoke", || {
        web::get().to(keys::confirm_revoke)
    }),
    ("/{customer}/keys/{key}/revoke", || {
        web::post().to(keys::revoke)
    }),
    ("/{customer}/audit", || web::get().to(keys::audit)),
    ("/{customer}/sessions", || web::get().to(sessions::list)),
    ("/{customer}/sessions/end-others", || {
        web::post().to(sessions::end_others)
    }),
    ("/{customer}/sessions/{session}/end", || {
        web::post().to(sessions::end_one)
    }),
    ("/{customer}/users", || web::get().to(directory::users)),
    ("/{customer}/groups", || web::get().to(directory::groups)),
    ("/{customer}/groups/{group}", || {
        web::get().to(directory::group)
    }),
];

/// The console's route templates under [`PREFIX`], each once, in [`TABLE`]'s order.
pub fn routes() -> Vec<&'static str> {
    let mut templates: Vec<&'static str> = Vec::new();
    for (template, _) in TABLE {
        if !templates.contains(template) {
            templates.push(template);
        }
    }
    templates
}

/// Mounts the console under [`PREFIX`].
pub fn configure(cfg: &mut web::ServiceConfig, state: ConsoleState) {
    let headers = DefaultHeaders::new()
        .add((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
        .add((header::X_FRAME_OPTIONS, "DENY"))
        .add((header::REFERRER_POLICY, "no-referrer"))
        .add((header::CACHE_CONTROL, "no-store"))
        .add((
            HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ));
    let mut scope = web::scope(PREFIX);
    for (template, route) in TABLE {
        scope = scope.route(template, route());
    }
    cfg.service(
        scope
            .app_data(web::Data::new(state))
            .app_data(web::PayloadConfig::new(pages::MAX_FORM_BYTES))
            .app_data(web::QueryConfig::default().error_handler(|_, _| {
                ConsoleError::BadRequest(
                    "This address is malformed. Start again from your console's sign-in page."
                        .to_owned(),
                )
                .into()
            }))
            .wrap(from_fn(throttle::throttle))
            .wrap(headers)
            .default_service(web::to(error::not_found)),
    );
}
