//! Where OAuth is served, and the issuer it names itself by.

use actix_web::HttpRequest;

use crate::state::ApiState;

/// The token endpoint.
pub const TOKEN_PATH: &str = "/oauth/token";
/// The authorization server's metadata (RFC 8414 §3).
pub const METADATA_PATH: &str = "/.well-known/oauth-authorization-server";

/// The issuer: `POSTURE_PUBLIC_URL` when set, else the origin the request reached (its
/// `Host`; forwarding headers believed from the trusted proxies only). RFC 8414 §3.3: the
/// metadata's `issuer` is the URL it was fetched under.
pub(crate) fn issuer(req: &HttpRequest, state: &ApiState) -> String {
    if let Some(public) = state.public_url.as_deref() {
        return public.trim_end_matches('/').to_owned();
    }
    let (scheme, host) = crate::client_ip::request_origin(req, &state.trusted_proxies);
    format!("{scheme}://{host}")
}
