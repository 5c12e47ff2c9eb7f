//! Signing in: the redirect to the provider (PKCE, state, nonce, the binding cookie), the
//! callback's refusals, the sign-in limit, the console switched off.

use super::provider::Provider;
use super::support::{
    browser, configure_sso, customer, customer_with_console, html, location, page,
};
use crate::support::TestApp;
use reqwest::{StatusCode, header};

#[tokio::test]
async fn sign_in_redirects_to_the_provider_with_pkce_state_and_nonce() {
    let app = TestApp::start().await;
    let provider = Provider::start().await;
    let (scope, customer) = customer(&app, "Contoso").await;
    configure_sso(&app, scope, &provider.issuer()).await;
    let start = format!("/console/{customer}/sign-in");
    let sign_in_page = html(
        page(&app, &format!("/console/{customer}/"), None).await,
        StatusCode::OK,
    )
    .await;
    assert!(sign_in_page.contains("Sign in to Contoso") && sign_in_page.contains(&start));

    let response = page(&app, &start, None).await;
    let to = url::Url::parse(&location(&response)).unwrap();
    assert_eq!(to.path(), "/authorize");
    let query: std::collections::HashMap<_, _> = to.query_pairs().into_owned().collect();
    assert_eq!(query["response_type"], "code");
    assert_eq!(query["client_id"], "posture");
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(
        query["redirect_uri"],
        app.url(&format!("/console/{customer}/callback"))
    );
    assert!(query["scope"].split(' ').any(|s| s == "openid"));
    assert!(query["state"].len() >= 16 && query["nonce"].len() >= 16);

    let cookie = response.headers()[header::SET_COOKIE].to_str().unwrap();
    assert!(cookie.starts_with("posture_sign_in="), "{cookie}");
    for flag in [
        "HttpOnly",
        "SameSite=Lax",
        &format!("Path=/console/{customer}/callback"),
        "Max-Age=600",
    ] {
        assert!(cookie.contains(flag), "{cookie} lacks {flag}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: not Secure");

    // From a client, forwarding headers are its own words: no Secure cookie, and the
    // redirect URI is the connection's own host, whatever `Forwarded` says.
    let spoofed = browser()
        .get(app.url(&start))
        .header("x-forwarded-proto", "https")
        .header("x-forwarded-host", "evil.example")
        .header("forwarded", "host=evil.example;proto=https")
        .send()
        .await
        .unwrap();
    let cookie = spoofed.headers()[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.starts_with("posture_sign_in=") && !cookie.contains("Secure"),
        "{cookie}"
    );
    let to = url::Url::parse(&location(&spoofed)).unwrap();
    let query: std::collections::HashMap<_, _> = to.query_pairs().into_owned().collect();
    assert_eq!(
        query["redirect_uri"],
        app.url(&format!("/console/{customer}/callback"))
    );
}

#[tokio::test]
async fn behind_a_trusted_tls_proxy_cookies_are_secure_and_named_for_it() {
    let app = TestApp::behind_trusted_proxy().await;
    let provider = Provider::start().await;
    let (scope, customer) = customer(&app, "Contoso").await;
    configure_sso(&app, scope, &provider.issuer()).await;
    let over_tls = browser()
        .get(app.url(&format!("/console/{customer}/sign-in")))
        .header("x-forwarded-proto", "https")
        .header("x-forwarded-host", "posture.example.com")
        .send()
        .await
        .unwrap();
    let cookie = over_tls.headers()[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.starts_with("__Secure-posture_sign_in=") && cookie.contains("Secure"),
        "HTTPS: Secure, with the prefix browsers enforce ({cookie})"
    );
    let to = url::Url::parse(&location(&over_tls)).unwrap();
    let query: std::collections::HashMap<_, _> = to.query_pairs().into_owned().collect();
    assert_eq!(
        query["redirect_uri"],
        format!("https://posture.example.com/console/{customer}/callback")
    );
}

#[tokio::test]
async fn a_callback_without_its_sign_in_cookie_or_with_a_wrong_state_is_refused() {
    let app = TestApp::start().await;
    let provider = Provider::start().await;
    let (scope, customer) = customer(&app, "Contoso").await;
    configure_sso(&app, scope, &provider.issuer()).await;
    let callback = format!("/console/{customer}/callback?code=abc&state=xyz");
    let body = html(page(&app, &callback, None).await, StatusCode::BAD_REQUEST).await;
    assert!(body.contains("Start again"));

    let started = page(&app, &format!("/console/{customer}/sign-in"), None).await;
    let binding = started.headers()[header::SET_COOKIE].to_str().unwrap();
    let binding = binding.split(';').next().unwrap().to_owned();
    let wrong_state = browser()
        .get(app.url(&callback))
        .header(header::COOKIE, &binding)
        .send()
        .await
        .unwrap();
    html(wrong_state, StatusCode::BAD_REQUEST).await;
    let denied = browser()
        .get(app.url(&format!("/console/{customer}/callback?error=access_denied")))
        .send()
        .await
        .unwrap();
    let body = html(denied, StatusCode::BAD_REQUEST).await;
    assert!(body.contains("did not sign you in (access_denied)"));
    // Not a dead end: the organisation's name stays in the header and a link leads back.
    assert!(body.contains("Contoso"), "the organisation's name: {body}");
    assert!(
        body.contains(&format!("href=\"/console/{customer}/\"")),
        "a link back to the sign-in page: {body}"
    );
}

#[tokio::test]
async fn sign_in_attempts_are_rate_limited_per_address() {
    let app = TestApp::with_sign_in_limit(2).await;
    let (_, customer) = customer_with_console(&app, "Contoso").await;
    let start = format!("/console/{customer}/sign-in");
    for _ in 0..2 {
        // The provider is unreachable: each attempt still counts, and the page names it.
        let body = html(
            page(&app, &start, None).await,
            StatusCode::SERVICE_UNAVAILABLE,
        )
        .await;
        assert!(
            body.contains("identity provider (127.0.0.1:9)"),
            "the page names the provider: {body}"
        );
        assert!(body.contains(&format!("href=\"/console/{customer}/\"")));
    }
    let refused = page(&app, &start, None).await;
    let retry_after: u64 = refused.headers()[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=600).contains(&retry_after));
    let body = html(refused, StatusCode::TOO_MANY_REQUESTS).await;
    assert!(body.contains("Too many sign-in attempts"));
}

#[tokio::test]
async fn a_customer_without_an_identity_provider_has_no_console() {
    let app = TestApp::start().await;
    let (_, customer) = customer(&app, "Contoso").await;
    for path in [
        format!("/console/{customer}/"),
        format!("/console/{customer}/sign-in"),
        format!("/console/{customer}/keys"),
        "/console/not-a-customer/".to_owned(),
        "/console/00000000-0000-0000-0000-000000000000/".to_owned(),
    ] {
        let body = html(page(&app, &path, None).await, StatusCode::NOT_FOUND).await;
        assert!(body.contains("Page not found"), "{path}");
    }
}

#[tokio::test]
async fn a_page_asked_with_a_method_it_lacks_is_405_naming_its_methods() {
    let app = TestApp::start().await;
    let (_, customer) = customer_with_console(&app, "Contoso").await;
    let response = browser()
        .delete(app.url(&format!("/console/{customer}/keys")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()[header::ALLOW], "GET, POST");
    // Still a console page, with the console's headers.
    assert!(
        response.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
    let body = html(response, StatusCode::METHOD_NOT_ALLOWED).await;
    assert!(body.contains("Not possible here"), "{body}");
    let response = browser().put(app.url("/console/")).send().await.unwrap();
    assert_eq!(response.headers()[header::ALLOW], "GET");
    html(response, StatusCode::METHOD_NOT_ALLOWED).await;
}

#[tokio::test]
async fn the_console_can_be_switched_off() {
    let app = TestApp::without_console().await;
    let (_, customer) = customer_with_console(&app, "Contoso").await;
    let response = page(&app, &format!("/console/{customer}/"), None).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert!(
        response.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
}

#[tokio::test]
async fn console_pages_count_against_the_addresss_request_budget_but_assets_do_not() {
    use std::sync::Arc;

    use posture_domain::rate_limit::RatePolicy;

    let app = TestApp::with_limiter(
        || {
            Arc::new(crate::harness::held_limiter(RatePolicy {
                limit: 3,
                window_secs: 60,
            }))
        },
        Default::default(),
    )
    .await;
    let (_, customer) = customer_with_console(&app, "Contoso").await;
    let home = format!("/console/{customer}/");
    for _ in 0..3 {
        html(page(&app, &home, None).await, StatusCode::OK).await;
    }
    let refused = page(&app, &home, None).await;
    assert!(refused.headers().contains_key(header::RETRY_AFTER));
    let body = html(refused, StatusCode::TOO_MANY_REQUESTS).await;
    assert!(body.contains("Too many requests"));
    let css = page(&app, "/console/assets/console.css", None).await;
    assert_eq!(css.status(), StatusCode::OK);
    assert!(
        css.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/css")
    );
}

#[tokio::test]
async fn a_malformed_callback_query_is_a_page_in_words() {
    let app = TestApp::start().await;
    let (_, customer) = customer_with_console(&app, "Contoso").await;
    let path = format!("/console/{customer}/callback?state=a&state=b");
    let body = html(page(&app, &path, None).await, StatusCode::BAD_REQUEST).await;
    assert!(body.contains("malformed"));
}
