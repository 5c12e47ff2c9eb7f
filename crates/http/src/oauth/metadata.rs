//! `GET /.well-known/oauth-authorization-server`: RFC 8414's metadata, for libraries that
//! discover the token endpoint and what it accepts.

use actix_web::{HttpRequest, HttpResponse, http::header, web};
use posture_domain::{Scope, oauth::KeyAlgorithm};
use serde_json::json;

use super::issuer::{TOKEN_PATH, issuer};
use crate::state::ApiState;

/// The client authentication methods the token endpoint takes.
pub(crate) const AUTH_METHODS: [&str; 3] = [
    "client_secret_basic",
    "client_secret_post",
    "private_key_jwt",
];

pub(super) async fn metadata(req: HttpRequest, state: web::Data<ApiState>) -> HttpResponse {
    let issuer = issuer(&req, &state);
    let document = json!({
        "issuer": issuer,
        "token_endpoint": format!("{issuer}{TOKEN_PATH}"),
        // Listed: the default is the authorization code and implicit grants.
        "grant_types_supported": ["client_credentials"],
        "token_endpoint_auth_methods_supported": AUTH_METHODS,
        "token_endpoint_auth_signing_alg_values_supported":
            KeyAlgorithm::ALL.iter().map(|alg| alg.as_str()).collect::<Vec<_>>(),
        "scopes_supported": Scope::ALL.iter().map(|scope| scope.as_str()).collect::<Vec<_>>(),
    });
    // No `response_types_supported`: no grant of posture's uses the authorization endpoint,
    // and RFC 8414 §3.2 omits a member with no values (erratum 7793).
    let mut document = document;
    if state.docs {
        document["service_documentation"] = format!("{issuer}{}", crate::docs_page::PATH).into();
    }
    // Shared caches may keep it only when it names the configured address, not the `Host`
    // of the request that fetched it.
    let cache = match state.public_url {
        Some(_) => "public, max-age=3600",
        None => "private, max-age=3600",
    };
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((header::CACHE_CONTROL, cache))
        .body(document.to_string())
}
