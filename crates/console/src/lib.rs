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
mod state;
mod throttle;

use actix_web::{
    http::header::{self, HeaderName},
    middleware::{DefaultHeaders, from_fn},
    web,
};

pub use error::ConsoleError;
pub use state::{ConsolePorts, ConsoleState, PREFIX};

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
