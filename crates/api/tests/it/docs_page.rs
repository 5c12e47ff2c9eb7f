//! `GET /api/v1/docs`: the API reference page and its vendored scripts (docs/api.md, "The
//! API reference page"). That the page renders every operation is checked in headless
//! Chromium by `cargo xtask clients`.

use reqwest::StatusCode;

use crate::support::{TestApp, assert_error};

fn script_sources(page: &str) -> Vec<String> {
    page.split("<script src=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_reference_page_is_public_with_a_strict_content_security_policy() {
    let app = TestApp::start().await;
    let response = app
        .client
        .get(app.url("/api/v1/docs"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"],
        "text/html; charset=utf-8"
    );
    let csp = response.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert!(!csp.contains("unsafe-eval"), "{csp}");
    let page = response.text().await.unwrap();
    assert!(!page.contains("<script>"), "no inline script");
    assert_eq!(script_sources(&page).len(), 2, "{page}");
}

#[tokio::test]
async fn the_pages_scripts_are_served_by_posture_itself() {
    let app = TestApp::start().await;
    let page = app.get_public_text("/api/v1/docs").await;
    for source in script_sources(&page) {
        assert!(!source.contains("//"), "{source} is on another origin");
        // Relative to the page, as a browser resolves it.
        let url = app.url(&format!("/api/v1/{source}"));
        let gzipped = app
            .client
            .get(&url)
            .header("Accept-Encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(gzipped.status(), StatusCode::OK, "{source}");
        assert!(
            gzipped.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/javascript"),
            "{source}"
        );
        if source.contains("scalar-") {
            assert_eq!(gzipped.headers()["content-encoding"], "gzip");
            assert_eq!(
                gzipped.headers()["cache-control"],
                "public, max-age=31536000, immutable"
            );
            let compressed = gzipped.bytes().await.unwrap().len();
            // Without gzip, the same script uncompressed.
            let plain = app
                .client
                .get(&url)
                .header("Accept-Encoding", "identity")
                .send()
                .await
                .unwrap();
            assert!(plain.headers().get("content-encoding").is_none());
            let body = plain.bytes().await.unwrap();
            assert!(
                body.len() > 2 * compressed,
                "{} vs {compressed}",
                body.len()
            );
            assert!(std::str::from_utf8(&body).is_ok());
        }
    }
}

#[tokio::test]
async fn the_page_with_a_trailing_slash_redirects_and_unknown_files_are_404() {
    let app = TestApp::start().await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = client.get(app.url("/api/v1/docs/")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(response.headers()["location"], "../docs");
    assert_error(
        app.client
            .get(app.url("/api/v1/docs/secrets.js"))
            .send()
            .await
            .unwrap(),
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn posture_docs_false_turns_the_page_off() {
    let app = TestApp::without_docs().await;
    for path in ["/api/v1/docs", "/api/v1/docs/init.js", "/api/v1/docs/"] {
        assert_error(
            app.client.get(app.url(path)).send().await.unwrap(),
            StatusCode::NOT_FOUND,
            "not_found",
        )
        .await;
    }
}
