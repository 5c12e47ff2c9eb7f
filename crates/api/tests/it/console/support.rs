//! A console over the test store, admins signed in through the port, and a browser-like
//! client that follows no redirects.

use std::time::Duration;

use posture_domain::{
    CustomerScope,
    console::{AdminRule, ClientSecret, NewSession, SessionPolicy, SignedInUser, SsoSettings},
    ports::ConsoleRepository,
};
use reqwest::{Client, Response, StatusCode, header};

use crate::support::{TestApp, test_keyring};

/// A client that shows redirects instead of following them.
pub fn browser() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// Gives the customer an identity provider at `issuer` whose `groups` claim names admins.
pub async fn configure_sso(app: &TestApp, scope: CustomerScope, issuer: &str) {
    let sealed = test_keyring()
        .seal_client_secret(
            &ClientSecret::new("client-secret".into()).unwrap(),
            scope.customer_id(),
        )
        .unwrap();
    let admins = AdminRule {
        claim: Some("groups".into()),
        values: vec!["posture-admins".into()],
        subjects: vec![],
    };
    let settings = SsoSettings {
        issuer: issuer.to_owned(),
        client_id: "posture".to_owned(),
        display_name: None,
        admins,
    };
    app.store.set_sso(scope, &settings, sealed).await.unwrap();
}

/// A customer (and its id, as console paths name it).
pub async fn customer(app: &TestApp, name: &str) -> (CustomerScope, String) {
    let (scope, _tenant) = app.customer(name).await;
    (scope, scope.customer_id().to_string())
}

/// A customer with a console (its provider unreachable: sessions come from [`admin`]).
pub async fn customer_with_console(app: &TestApp, name: &str) -> (CustomerScope, String) {
    let (scope, id) = customer(app, name).await;
    configure_sso(app, scope, "http://127.0.0.1:9").await;
    (scope, id)
}

/// A signed-in admin of the customer.
pub struct Admin {
    pub token: String,
    pub csrf: String,
    pub subject: String,
}

impl Admin {
    pub fn cookie(&self) -> String {
        format!("posture_session={}", self.token)
    }
}

/// Signs an admin in, as the callback does after the provider vouched for them.
pub async fn admin(app: &TestApp, scope: CustomerScope, name: &str) -> Admin {
    let user = SignedInUser {
        subject: format!("sub-{name}"),
        display_name: name.to_owned(),
        claims: Default::default(),
    };
    let session = NewSession::start(
        scope.customer_id(),
        &user,
        SessionPolicy::DEFAULT,
        app.now(),
    )
    .unwrap();
    app.store.create_session(&session, None).await.unwrap();
    Admin {
        token: session.token.expose().to_owned(),
        csrf: session.csrf_token.clone(),
        subject: user.subject,
    }
}

/// `GET` a console page as this admin.
pub async fn page(app: &TestApp, path: &str, admin: Option<&Admin>) -> Response {
    let mut request = browser().get(app.url(path));
    if let Some(admin) = admin {
        request = request.header(header::COOKIE, admin.cookie());
    }
    request.send().await.unwrap()
}

/// `POST` a form to the console as this admin.
pub async fn post_form(
    app: &TestApp,
    path: &str,
    admin: &Admin,
    form: &[(&str, &str)],
) -> Response {
    browser()
        .post(app.url(path))
        .header(header::COOKIE, admin.cookie())
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string(form).unwrap())
        .send()
        .await
        .unwrap()
}

/// The body of an HTML page with this status.
pub async fn html(response: Response, status: StatusCode) -> String {
    assert_eq!(response.status(), status);
    assert!(
        response.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html"),
        "not a page"
    );
    response.text().await.unwrap()
}

/// Where a redirect points.
pub fn location(response: &Response) -> String {
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    response.headers()[header::LOCATION]
        .to_str()
        .unwrap()
        .to_owned()
}

/// The key shown on an "issued" page.
pub fn shown_key(page: &str) -> String {
    let start = page.find("svc_").expect("the page shows a key");
    page[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}
