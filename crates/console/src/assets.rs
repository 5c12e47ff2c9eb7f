//! The stylesheet and the script, compiled into the binary and served by posture (the
//! Content-Security-Policy allows no other origin and no inline code).

use actix_web::{HttpResponse, http::header, web};

use crate::ConsoleError;

const CSS: &str = include_str!("../assets/console.css");
const JS: &str = include_str!("../assets/console.js");
const ICON: &str = include_str!("../assets/favicon.svg");

/// `GET /console/assets/{file}`.
pub async fn serve(file: web::Path<String>) -> Result<HttpResponse, ConsoleError> {
    let (body, content_type) = match file.as_str() {
        "console.css" => (CSS, "text/css; charset=utf-8"),
        "console.js" => (JS, "text/javascript; charset=utf-8"),
        "favicon.svg" => (ICON, "image/svg+xml"),
        _ => return Err(ConsoleError::NotFound),
    };
    Ok(HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(body))
}
