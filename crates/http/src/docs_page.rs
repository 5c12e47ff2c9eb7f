//! `GET /api/v1/docs`: the API reference, rendered in the browser from the served contract
//! (`/api/v1/openapi.json`) by Scalar's browser bundle, vendored into the binary
//! (`cargo xtask vendor-docs`; nothing is fetched from another origin at run time).
//!
//! Public like the contract, outside the gate (static pages cost no query and carry no
//! customer data). A strict `Content-Security-Policy`: scripts and connections to this
//! origin only, no inline script, no frames; inline styles are allowed because the bundle
//! injects its stylesheet. `POSTURE_DOCS=false` turns it off (404).

use std::{io::Read as _, sync::OnceLock};

use actix_web::{HttpRequest, HttpResponse, http::header, web};

use crate::{error::ApiError, state::ApiState};

/// The page's path, under which its two scripts are served too.
pub const PATH: &str = "/api/v1/docs";

/// The vendored bundle, gzipped.
const BUNDLE_GZ: &[u8] = include_bytes!("../assets/docs/scalar-api-reference.js.gz");
/// Its version, which names the served file (so it can be cached for good).
const BUNDLE_VERSION: &str = include_str!("../assets/docs/scalar.version");
const INIT: &str = include_str!("../assets/docs/init.js");

/// What the page and its scripts may load and do.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; \
    connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The bundle's file name, with its version (built once).
fn bundle_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| format!("scalar-{}.js", BUNDLE_VERSION.trim()))
}

/// The page (built once).
fn page() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(render_page)
}

fn render_page() -> String {
    // Relative references: the page keeps working under a path prefix added by a proxy.
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>posture API reference</title>\n</head>\n<body>\n\
         <noscript>This reference needs JavaScript. The contract it renders: \
         <a href=\"openapi.json\">openapi.json</a>.</noscript>\n\
         <div id=\"reference\"></div>\n\
         <script src=\"docs/{}\"></script>\n<script src=\"docs/init.js\"></script>\n\
         </body>\n</html>\n",
        bundle_name()
    )
}

/// The bundle without compression, for the rare client that does not take gzip.
fn bundle_plain() -> &'static [u8] {
    static PLAIN: OnceLock<Vec<u8>> = OnceLock::new();
    PLAIN.get_or_init(|| {
        let mut plain = Vec::new();
        // The input is compiled in and checked by a unit test: it always decompresses.
        let _ = flate2::read::GzDecoder::new(BUNDLE_GZ).read_to_end(&mut plain);
        plain
    })
}

fn accepts_gzip(req: &HttpRequest) -> bool {
    req.headers()
        .get_all(header::ACCEPT_ENCODING)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .is_some_and(|q| q.trim().parse::<f32>().map_or(true, |q| q <= 0.0))
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

fn enabled(state: &ApiState) -> Result<(), ApiError> {
    match state.docs {
        true => Ok(()),
        false => Err(ApiError::NotFound(Some("no such route"))),
    }
}

/// `GET /api/v1/docs`.
pub async fn serve_page(state: web::Data<ApiState>) -> Result<HttpResponse, ApiError> {
    enabled(&state)?;
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .body(page()))
}

/// `GET /api/v1/docs/`: the page's relative references need the path without the slash.
pub async fn redirect_to_page(state: web::Data<ApiState>) -> Result<HttpResponse, ApiError> {
    enabled(&state)?;
    Ok(HttpResponse::PermanentRedirect()
        .insert_header((header::LOCATION, "../docs"))
        .finish())
}

/// `GET /api/v1/docs/{file}`: the bundle (named by its version) and the page's script.
pub async fn serve_asset(
    req: HttpRequest,
    file: web::Path<String>,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    enabled(&state)?;
    let mut response = HttpResponse::Ok();
    response
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY));
    if file.as_str() == bundle_name() {
        response
            .insert_header((header::CACHE_CONTROL, "public, max-age=31536000, immutable"))
            .insert_header((header::VARY, "Accept-Encoding"));
        return Ok(match accepts_gzip(&req) {
            true => response
                .insert_header((header::CONTENT_ENCODING, "gzip"))
                .body(BUNDLE_GZ),
            false => response.body(bundle_plain()),
        });
    }
    match file.as_str() {
        "init.js" => Ok(response
            .insert_header((header::CACHE_CONTROL, "no-cache"))
            .body(INIT)),
        _ => Err(ApiError::NotFound(Some("no such file"))),
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest as _, Sha256};

    use super::*;

    #[test]
    fn the_embedded_bundle_is_the_vendored_one() {
        let digest: String = Sha256::digest(bundle_plain())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            digest,
            include_str!("../assets/docs/scalar.sha256").trim(),
            "run cargo xtask vendor-docs"
        );
        assert!(bundle_plain().len() > 1_000_000);
    }

    #[test]
    fn the_page_loads_only_its_own_scripts() {
        let page = page();
        assert!(page.contains(&format!("src=\"docs/{}\"", bundle_name())));
        assert!(!page.contains("<script>"), "no inline script");
        assert!(!page.contains("http"), "nothing from another origin");
        assert!(!INIT.contains("http"), "nothing from another origin");
    }

    #[test]
    fn gzip_is_sent_only_to_clients_that_take_it() {
        let request = |value: Option<&str>| {
            let mut test = actix_web::test::TestRequest::default();
            if let Some(value) = value {
                test = test.insert_header((header::ACCEPT_ENCODING, value));
            }
            accepts_gzip(&test.to_http_request())
        };
        assert!(request(Some("gzip, deflate, br")));
        assert!(request(Some("br;q=1.0, GZIP;q=0.5")));
        assert!(request(Some("*")));
        assert!(!request(None));
        assert!(!request(Some("br")));
        assert!(!request(Some("gzip;q=0")));
        assert!(!request(Some("gzip;q=nonsense")));
    }
}
