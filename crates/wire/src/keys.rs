//! The caller's own key (`GET /api/v1/keys/current`).

use chrono::{DateTime, Utc};
use posture_domain::{
    Scope,
    api_key::{CurrentKey, DISPLAY_PREFIX_PATTERN},
};
use schemars::JsonSchema;
use serde::Serialize;

/// The key the request presented (or, for an OAuth access token, its client): what it may
/// do and how long it lives. Never the secret.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CurrentKeyResponse {
    #[schemars(schema_with = "crate::uuid")]
    pub id: String,
    /// The name the key was issued with.
    pub name: String,
    /// The key's first characters (`svc_` and 6 more), as the console and the operator CLI
    /// list them; an OAuth client's are its `client_id`'s (`pci_` and 6 more).
    #[schemars(pattern(DISPLAY_PREFIX_PATTERN))]
    pub prefix: String,
    /// The scopes the key (or client) was issued with, in a fixed order; an access token
    /// may hold fewer (the `scope` its request named).
    #[schemars(schema_with = "crate::closed_set_list::<Scope>")]
    pub scopes: Vec<Scope>,
    pub customer: KeyCustomer,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// When the key stops working; `null`: it does not expire.
    #[serde(serialize_with = "crate::time::option::serialize")]
    pub expires_at: Option<DateTime<Utc>>,
    /// When posture last recorded a use of the key. Recorded at most once a minute per key
    /// and instance, off the request path, so it may lag the current request by a minute;
    /// `null` before the first recorded use.
    #[serde(serialize_with = "crate::time::option::serialize")]
    pub last_used_at: Option<DateTime<Utc>>,
    /// The address of that use (IPv4, or IPv6; the client's address behind the operator's
    /// trusted proxies); `null` before the first recorded use.
    #[schemars(example = &"203.0.113.7")]
    pub last_used_from: Option<String>,
    /// The `User-Agent` of that use, made one line of at most 200 bytes; `null` when none
    /// was sent or before the first recorded use.
    pub last_used_user_agent: Option<String>,
    /// The networks the key may be used from (canonical CIDR); empty: from anywhere. A
    /// request from elsewhere is refused with 403 `forbidden`.
    pub allow_from: Vec<String>,
}

/// The customer a key belongs to.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyCustomer {
    #[schemars(schema_with = "crate::uuid")]
    pub id: String,
    pub name: String,
}

impl From<CurrentKey> for CurrentKeyResponse {
    fn from(current: CurrentKey) -> Self {
        let key = current.key;
        Self {
            id: key.id.to_string(),
            name: key.name,
            prefix: key.prefix,
            scopes: key.scopes.iter().collect(),
            customer: KeyCustomer {
                id: key.customer_id.to_string(),
                name: current.customer_name,
            },
            created_at: key.created_at,
            expires_at: key.expires_at,
            last_used_at: key.last_used_at,
            last_used_from: key.last_used_from.map(|ip| ip.to_string()),
            last_used_user_agent: key.last_used_user_agent,
            allow_from: key.allow_from.to_strings(),
        }
    }
}
