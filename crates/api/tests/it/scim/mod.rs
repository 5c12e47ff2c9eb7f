//! `/scim/v2`: what identity providers send, per customer, over real HTTP and PostgreSQL.

mod groups;
mod hostile;
mod users;

use posture_domain::{CustomerScope, Scope};
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::support::TestApp;

/// A served instance and one customer's SCIM key.
pub struct Scim {
    pub app: TestApp,
    pub customer: CustomerScope,
    pub key: String,
}

impl Scim {
    pub async fn start() -> Self {
        let app = TestApp::start().await;
        let (customer, _) = app.customer("A").await;
        let (_, key) = app.key(customer, &[Scope::ProvisionScim]).await;
        Self { app, customer, key }
    }

    /// Another customer's SCIM key on the same instance.
    pub async fn other_key(&self) -> String {
        let (other, _) = self.app.customer("B").await;
        self.app.key(other, &[Scope::ProvisionScim]).await.1
    }

    pub async fn send(&self, method: Method, path: &str, body: Option<Value>) -> Response {
        self.send_as(&self.key, method, path, body).await
    }

    pub async fn send_as(
        &self,
        key: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Response {
        let mut request = self
            .app
            .client
            .request(method, self.app.url(&format!("/scim/v2{path}")))
            .bearer_auth(key);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/scim+json")
                .body(body.to_string());
        }
        request.send().await.unwrap()
    }

    /// Sends, expects `status`, returns the body (`Null` for none).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        status: StatusCode,
    ) -> Value {
        let response = self.send(method.clone(), path, body).await;
        json_of(response, status, &format!("{method} {path}")).await
    }

    pub async fn create_user(&self, user_name: &str) -> Value {
        self.call(
            Method::POST,
            "/Users",
            Some(json!({
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
                "userName": user_name,
                "active": true,
            })),
            StatusCode::CREATED,
        )
        .await
    }
}

/// The body of a SCIM answer of `status` (`application/scim+json`), `Null` when empty.
pub async fn json_of(response: Response, status: StatusCode, what: &str) -> Value {
    let got = response.status();
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = response.text().await.unwrap();
    assert_eq!(got, status, "{what}: {text}");
    if text.is_empty() {
        return Value::Null;
    }
    assert_eq!(kind.as_deref(), Some("application/scim+json"), "{what}");
    serde_json::from_str(&text).unwrap()
}

/// Asserts RFC 7644's error body (and nothing else in it); returns it.
pub async fn assert_scim_error(
    response: Response,
    status: StatusCode,
    scim_type: Option<&str>,
) -> Value {
    let body = json_of(response, status, "an error").await;
    assert_eq!(
        body["schemas"],
        json!(["urn:ietf:params:scim:api:messages:2.0:Error"]),
        "{body}"
    );
    assert_eq!(body["status"], status.as_str(), "{body}");
    assert_eq!(body["scimType"].as_str(), scim_type, "{body}");
    assert!(
        body.as_object()
            .unwrap()
            .keys()
            .all(|k| ["schemas", "status", "scimType", "detail"].contains(&k.as_str())),
        "{body}"
    );
    body
}
