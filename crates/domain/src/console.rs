//! The customer console: single sign-on configuration, sign-ins, sessions and the audit log
//! of key issuance and revocation (docs/console.md).
//!
//! A customer's admins sign in with the customer's own OpenID Connect provider. Who is an
//! admin is an [`AdminRule`] the operator sets. A signed-in admin holds a [`SessionToken`]
//! in a cookie; only its SHA-256 is stored, with a CSRF token every form must carry back.
//! Sessions end at sign-out, after [`SessionPolicy::idle`] without a request, and at
//! [`SessionPolicy::absolute`] after sign-in, whichever comes first.

use std::{fmt, time::Duration};

use base64::Engine as _;
use chrono::{DateTime, Utc};
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::{
    customer::CustomerScope,
    error::Error,
    ids::{CustomerId, KeyId},
};

/// Longest issuer URL, client id or claim value accepted in a configuration.
pub const MAX_SSO_FIELD_LEN: usize = 1024;
/// Most admin values or subjects in one rule.
pub const MAX_ADMIN_ENTRIES: usize = 100;
/// How long a sign-in may take between the redirect and the callback.
pub const SIGN_IN_LIFETIME: Duration = Duration::from_secs(600);
/// Most sign-ins of one customer waiting for their callback; older ones go first.
pub const MAX_PENDING_SIGN_INS: i64 = 1000;

/// `count` random bytes from the operating system's CSPRNG, as unpadded base64url.
pub fn random_token(count: usize) -> Result<String, Error> {
    let mut bytes = vec![0u8; count];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| Error::internal("the system CSPRNG failed"))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// SHA-256 of a token: what is stored of session tokens and sign-in bindings.
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Constant-time equality of two presented strings (CSRF tokens, OAuth `state`).
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// The client secret of a customer's OpenID Connect client. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientSecret(String);

impl ClientSecret {
    pub fn new(secret: String) -> Result<Self, Error> {
        if secret.is_empty() || secret.len() > MAX_SSO_FIELD_LEN {
            return Err(Error::invalid(
                "clientSecret",
                format!("a client secret has 1 to {MAX_SSO_FIELD_LEN} bytes"),
            ));
        }
        Ok(Self(secret))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientSecret(<redacted>)")
    }
}

/// Who among the provider's users is an admin of the customer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AdminRule {
    /// A claim of the ID token (e.g. `groups`, `roles`) ...
    pub claim: Option<String>,
    /// ... holding one of these values (the claim may be a string or an array of strings).
    pub values: Vec<String>,
    /// Subjects (`sub`) who are admins whatever their claims.
    pub subjects: Vec<String>,
}

impl AdminRule {
    /// Checks the rule admits someone and its entries are bounded.
    pub fn validate(&self) -> Result<(), Error> {
        if self.values.is_empty() && self.subjects.is_empty() {
            return Err(Error::invalid(
                "admins",
                "name the admins: an admin claim with its values, or admin subjects",
            ));
        }
        if self.claim.is_some() == self.values.is_empty() {
            return Err(Error::invalid(
                "adminClaim",
                "an admin claim needs at least one admin value, and values need a claim",
            ));
        }
        if self.values.len() > MAX_ADMIN_ENTRIES || self.subjects.len() > MAX_ADMIN_ENTRIES {
            return Err(Error::invalid(
                "admins",
                format!(
                    "at most {MAX_ADMIN_ENTRIES} admin values and {MAX_ADMIN_ENTRIES} subjects"
                ),
            ));
        }
        let fields = self.claim.iter().chain(&self.values).chain(&self.subjects);
        for field in fields {
            if field.is_empty() || field.len() > MAX_SSO_FIELD_LEN {
                return Err(Error::invalid(
                    "admins",
                    format!(
                        "admin claims, values and subjects have 1 to {MAX_SSO_FIELD_LEN} bytes"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Whether the user with this subject and these ID token claims is an admin.
    pub fn admits(&self, subject: &str, claims: &serde_json::Map<String, Value>) -> bool {
        if self.subjects.iter().any(|s| s == subject) {
            return true;
        }
        let Some(claim) = &self.claim else {
            return false;
        };
        let held = |v: &Value| {
            v.as_str()
                .is_some_and(|v| self.values.iter().any(|a| a == v))
        };
        match claims.get(claim) {
            Some(Value::Array(items)) => items.iter().any(held),
            Some(value) => held(value),
            None => false,
        }
    }
}

/// A customer's identity provider, as the operator configured it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SsoConfig {
    pub customer_id: CustomerId,
    /// The issuer URL (discovery is `<issuer>/.well-known/openid-configuration`).
    pub issuer: String,
    pub client_id: String,
    pub admins: AdminRule,
    pub updated_at: DateTime<Utc>,
}

/// Checks an issuer URL: `https`, or `http` on a loopback address (a development
/// provider); no query or fragment (OpenID Connect Discovery 1.0, section 2).
pub fn validate_issuer(issuer: &str) -> Result<(), Error> {
    let invalid = |reason: &str| Err(Error::invalid("issuer", reason.to_owned()));
    if issuer.len() > MAX_SSO_FIELD_LEN {
        return invalid("too long");
    }
    let Ok(url) = url::Url::parse(issuer) else {
        return invalid("not a URL");
    };
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return invalid("an issuer has no query, fragment or credentials");
    }
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name == "localhost",
        None => false,
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => invalid("must be https (http only on a loopback address, for development)"),
    }
}

/// What the AEAD binds a sealed client secret to: it cannot be moved to another customer.
pub fn client_secret_context(customer: CustomerId) -> Vec<u8> {
    format!("console-sso:{customer}").into_bytes()
}

/// A sign-in waiting for the provider's callback.
#[derive(Clone, PartialEq, Eq)]
pub struct PendingSignIn {
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
}

impl fmt::Debug for PendingSignIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PendingSignIn(<redacted>)")
    }
}

/// The start of a sign-in: where to send the browser, and what to keep for the callback.
#[derive(Debug)]
pub struct SignInStart {
    pub authorize_url: String,
    pub pending: PendingSignIn,
}

/// Who signed in, as the provider vouched in a verified ID token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedInUser {
    pub subject: String,
    /// `name`, else `preferred_username`, else `email`, else the subject.
    pub display_name: String,
    /// Every claim of the ID token (for the admin rule).
    pub claims: serde_json::Map<String, Value>,
}

/// A session token: 32 random bytes, base64url. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionToken(String);

impl SessionToken {
    pub fn generate() -> Result<Self, Error> {
        random_token(32).map(Self)
    }

    /// A token presented in a cookie: only its hash is used.
    pub fn presented(text: &str) -> Option<Self> {
        (text.len() == 43
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
        .then(|| Self(text.to_owned()))
    }

    pub fn hash(&self) -> [u8; 32] {
        token_hash(&self.0)
    }

    /// For the `Set-Cookie` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SessionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionToken(<redacted>)")
    }
}

/// How long sessions last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionPolicy {
    /// A session unused this long ends.
    pub idle: Duration,
    /// A session ends this long after sign-in, used or not.
    pub absolute: Duration,
}

impl SessionPolicy {
    pub const DEFAULT: SessionPolicy = SessionPolicy {
        idle: Duration::from_secs(30 * 60),
        absolute: Duration::from_secs(8 * 3600),
    };
}

/// A new session, as created at sign-in.
#[derive(Debug)]
pub struct NewSession {
    pub customer_id: CustomerId,
    pub token: SessionToken,
    pub subject: String,
    pub display_name: String,
    pub csrf_token: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

impl NewSession {
    /// A session for `user`, with fresh token and CSRF token.
    pub fn start(
        customer_id: CustomerId,
        user: &SignedInUser,
        policy: SessionPolicy,
        now: DateTime<Utc>,
    ) -> Result<Self, Error> {
        let absolute = chrono::Duration::from_std(policy.absolute)
            .map_err(|_| Error::internal("session lifetime out of range"))?;
        Ok(Self {
            customer_id,
            token: SessionToken::generate()?,
            subject: user.subject.clone(),
            display_name: user.display_name.clone(),
            csrf_token: random_token(32)?,
            created_at: now,
            expires_at: now + absolute,
        })
    }
}

/// A live session, found by its token.
#[derive(Clone, PartialEq, Eq)]
pub struct ConsoleSession {
    customer_id: CustomerId,
    pub subject: String,
    pub display_name: String,
    pub csrf_token: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

impl fmt::Debug for ConsoleSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsoleSession")
            .field("customer_id", &self.customer_id)
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

impl ConsoleSession {
    /// A session the store found live for this customer.
    pub fn verified(
        customer_id: CustomerId,
        subject: String,
        display_name: String,
        csrf_token: String,
        created_at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Self {
        Self {
            customer_id,
            subject,
            display_name,
            csrf_token,
            created_at,
            expires_at,
        }
    }

    /// The customer whose keys this admin manages.
    pub fn scope(&self) -> CustomerScope {
        CustomerScope::new(self.customer_id)
    }

    /// Whether a form's CSRF token is this session's (in constant time).
    pub fn csrf_matches(&self, presented: &str) -> bool {
        same_secret(&self.csrf_token, presented)
    }

    /// The session's admin, as the audit log records them.
    pub fn actor(&self) -> Actor {
        Actor::Admin {
            subject: self.subject.clone(),
            name: self.display_name.clone(),
        }
    }
}

/// Who issued or revoked a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Actor {
    /// An admin signed in to the console.
    Admin { subject: String, name: String },
    /// The platform operator, with `posture-api keys`.
    Operator,
}

impl Actor {
    pub fn kind(&self) -> &'static str {
        match self {
            Actor::Admin { .. } => "admin",
            Actor::Operator => "operator",
        }
    }

    pub fn subject(&self) -> &str {
        match self {
            Actor::Admin { subject, .. } => subject,
            Actor::Operator => "operator",
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Actor::Admin { name, .. } => name,
            Actor::Operator => "posture operator",
        }
    }
}

/// One line of a customer's audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditEvent {
    pub at: DateTime<Utc>,
    pub actor_kind: String,
    pub actor_subject: String,
    pub actor_name: String,
    /// `key.issued`, `key.revoked`; `sso.set`, `sso.cleared` (the sign-in settings);
    /// `session.signed_in`, `session.signed_out` (an admin's session).
    pub action: String,
    /// The key, for a key's line.
    pub key: Option<AuditedKey>,
    /// What else the line says (an `sso.set`: the issuer, and the sessions it ended).
    pub detail: Option<String>,
}

/// The key an audit line is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditedKey {
    pub id: KeyId,
    pub name: String,
    pub prefix: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(value: Value) -> serde_json::Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    fn rule() -> AdminRule {
        AdminRule {
            claim: Some("groups".into()),
            values: vec!["posture-admins".into()],
            subjects: vec!["root-subject".into()],
        }
    }

    #[test]
    fn an_admin_holds_an_admin_value_in_the_claim_array() {
        let c = claims(json!({"groups": ["staff", "posture-admins"]}));
        assert!(rule().admits("alice", &c));
    }

    #[test]
    fn a_string_claim_is_one_value() {
        assert!(rule().admits("alice", &claims(json!({"groups": "posture-admins"}))));
    }

    #[test]
    fn a_user_without_the_value_is_not_an_admin() {
        assert!(!rule().admits("bob", &claims(json!({"groups": ["staff"]}))));
        assert!(!rule().admits("bob", &claims(json!({}))));
        assert!(!rule().admits("bob", &claims(json!({"groups": [{"v": "posture-admins"}]}))));
        assert!(!rule().admits("bob", &claims(json!({"roles": ["posture-admins"]}))));
    }

    #[test]
    fn a_listed_subject_is_an_admin_without_the_claim() {
        assert!(rule().admits("root-subject", &claims(json!({}))));
    }

    #[test]
    fn a_rule_must_name_someone() {
        assert!(AdminRule::default().validate().is_err());
        let values_without_claim = AdminRule {
            claim: None,
            values: vec!["x".into()],
            subjects: vec![],
        };
        assert!(values_without_claim.validate().is_err());
        assert!(rule().validate().is_ok());
    }

    #[test]
    fn session_tokens_are_32_random_bytes_and_hashes_differ() {
        let a = SessionToken::generate().unwrap();
        let b = SessionToken::generate().unwrap();
        assert_eq!(a.expose().len(), 43);
        assert_ne!(a.hash(), b.hash());
        assert!(SessionToken::presented(a.expose()).is_some());
        assert!(SessionToken::presented("short").is_none());
        assert!(!format!("{a:?}").contains(a.expose()));
    }

    #[test]
    fn issuers_are_https_or_loopback_http() {
        assert!(validate_issuer("https://login.example.com/tenant/v2.0").is_ok());
        assert!(validate_issuer("http://127.0.0.1:9000").is_ok());
        assert!(validate_issuer("http://localhost:9000/").is_ok());
        assert!(validate_issuer("http://idp.example.com").is_err());
        assert!(validate_issuer("https://idp.example.com/?a=b").is_err());
        assert!(validate_issuer("not a url").is_err());
    }

    #[test]
    fn csrf_tokens_compare_exactly() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
    }
}
