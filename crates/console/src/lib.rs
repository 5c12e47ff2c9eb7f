//! The customer console (docs/console.md): server-rendered pages under `/console/` where a
//! customer's admins, signed in with their own OpenID Connect provider, issue and revoke
//! their organisation's API keys and OAuth clients, read the audit log of who did so, see and end their
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
mod audit_page;
mod client_pages;
mod clients;
mod directory;
mod error;
mod fences;
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

use posture_http::mount::{self, Mount};

pub use error::ConsoleError;
pub use state::{ConsolePorts, ConsoleState, PREFIX};

/// The policy every console response carries: scripts and styles from posture only, no
/// inline script, no framing, forms posted to posture only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'none'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// The console's routes under [`PREFIX`]: the one list [`configure`] mounts and [`routes`]
/// (the templates the access log and the metrics name its requests by) reads.
const TABLE: &[Mount] = &[
    Mount::get("/", || web::to(pages::landing)),
    Mount::get("/assets/{file}", || web::to(assets::serve)),
    Mount::get("/{customer}", || web::to(sign_in::sign_in_page)),
    Mount::get("/{customer}/", || web::to(sign_in::sign_in_page)),
    Mount::get("/{customer}/sign-in", || web::to(sign_in::start)),
    Mount::get("/{customer}/callback", || web::to(sign_in::callback)),
    Mount::post("/{customer}/sign-out", || web::to(sign_in::sign_out)),
    Mount::get("/{customer}/keys", || web::to(keys::list)),
    Mount::post("/{customer}/keys", || web::to(keys::issue)),
    Mount::get("/{customer}/keys/{key}/revoke", || {
        web::to(keys::confirm_revoke)
    }),
    Mount::post("/{customer}/keys/{key}/revoke", || web::to(keys::revoke)),
    Mount::get("/{customer}/keys/{key}/allow-from", || {
        web::to(fences::key_form)
    }),
    Mount::post("/{customer}/keys/{key}/allow-from", || {
        web::to(fences::key_save)
    }),
    Mount::get("/{customer}/clients", || web::to(clients::list)),
    Mount::post("/{customer}/clients", || web::to(clients::issue)),
    Mount::get("/{customer}/clients/{client}/rotate", || {
        web::to(clients::rotate_form)
    }),
    Mount::post("/{customer}/clients/{client}/rotate", || {
        web::to(clients::rotate)
    }),
    Mount::get("/{customer}/clients/{client}/revoke", || {
        web::to(clients::confirm_revoke)
    }),
    Mount::post("/{customer}/clients/{client}/revoke", || {
        web::to(clients::revoke)
    }),
    Mount::get("/{customer}/clients/{client}/allow-from", || {
        web::to(fences::client_form)
    }),
    Mount::post("/{customer}/clients/{client}/allow-from", || {
        web::to(fences::client_save)
    }),
    Mount::get("/{customer}/settings", || web::to(fences::settings)),
    Mount::post("/{customer}/settings", || web::to(fences::save_settings)),
    Mount::get("/{customer}/audit", || web::to(keys::audit)),
    Mount::get("/{customer}/sessions", || web::to(sessions::list)),
    Mount::post("/{customer}/sessions/end-others", || {
        web::to(sessions::end_others)
    }),
    Mount::post("/{customer}/sessions/{session}/end", || {
        web::to(sessions::end_one)
    }),
    Mount::get("/{customer}/users", || web::to(directory::users)),
    Mount::get("/{customer}/groups", || web::to(directory::groups)),
    Mount::get("/{customer}/groups/{group}", || web::to(directory::group)),
];

/// The console's route templates under [`PREFIX`], each once, in [`TABLE`]'s order.
pub fn routes() -> Vec<&'static str> {
    mount::templates(TABLE)
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
    let scope = mount::scope(PREFIX, TABLE, |allow| ConsoleError::MethodNotAllowed {
        allow,
    });
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_route_table_has_no_faults() {
        assert_eq!(
            posture_http::mount::faults(super::TABLE),
            Vec::<String>::new()
        );
    }
}
