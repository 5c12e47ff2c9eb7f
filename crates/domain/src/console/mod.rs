//! The customer console: single sign-on configuration, sign-ins, sessions and the audit log
//! of key issuance and revocation (docs/console.md).
//!
//! A customer's admins sign in with the customer's own OpenID Connect provider. Who is an
//! admin is an [`AdminRule`] the operator sets, or, when the customer requires
//! [`Provisioning`], membership of a SCIM group. A signed-in admin holds a [`SessionToken`]
//! in a cookie; only its SHA-256 is stored, with a CSRF token every form must carry back.
//! Sessions end at sign-out, after [`SessionPolicy::idle`] without a request, and at
//! [`SessionPolicy::absolute`] after sign-in, whichever comes first.

use std::{fmt, net::IpAddr, time::Duration};

use base64::Engine as _;
use chrono::{DateTime, Utc};
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

mod actor;
mod provisioning;
mod sso;

pub use actor::Actor;

pub use provisioning::{Admission, MAX_CLAIM_NAME_LEN, ProvisionedSignIn, Provisioning};
pub use sso::{
    AdminRule, MAX_ADMIN_ENTRIES, MAX_DISPLAY_NAME_CHARS, MAX_SSO_FIELD_LEN, SsoConfig,
    SsoSettings, issuer_host, validate_display_name, validate_issuer,
};

use crate::{
    customer::CustomerScope,
    error::Error,
    ids::{CustomerId, KeyId},
};

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

/// The key that seals the console's one-time form tokens, derived from the server's secret
/// key: no admin can make a token, only receive one in a page posture rendered.
pub struct FormKey(ring::hmac::Key);

impl fmt::Debug for FormKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FormKey").finish_non_exhaustive()
    }
}

impl FormKey {
    pub fn derive(secret: &[u8; 32]) -> Self {
        Self(ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            &crate::cursor::derive(secret, b"posture console form key v1"),
        ))
    }

    /// The key-issue form's one-time token for the session of `csrf_token`: the id the key
    /// will get (so the same form posted twice issues one key) and a MAC binding it to the
    /// session, under a key only the server holds. An admin can neither pick an id (another
    /// customer's, to learn whether it exists) nor use another session's form.
    pub fn issue_form_token(&self, csrf_token: &str, id: KeyId) -> String {
        let mac = ring::hmac::sign(&self.0, &issue_form_message(csrf_token, id));
        format!(
            "{id}.{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.as_ref())
        )
    }

    /// The key id of an issue form's token, if posture made it for the session of
    /// `csrf_token` (the MAC checked in constant time).
    pub fn issue_form_key(&self, csrf_token: &str, token: &str) -> Option<KeyId> {
        let (id, mac) = token.split_once('.')?;
        let id: KeyId = id.parse().ok()?;
        let mac = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(mac)
            .ok()?;
        ring::hmac::verify(&self.0, &issue_form_message(csrf_token, id), &mac).ok()?;
        Some(id)
    }
}

/// What a form token's MAC covers: the purpose, the session's CSRF token, the key id (each
/// part length-prefixed).
fn issue_form_message(csrf_token: &str, id: KeyId) -> Vec<u8> {
    let id = id.to_string();
    let mut message = Vec::new();
    for part in [
        b"issue key".as_slice(),
        csrf_token.as_bytes(),
        id.as_bytes(),
    ] {
        message.extend_from_slice(&(part.len() as u64).to_be_bytes());
        message.extend_from_slice(part);
    }
    message
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
    /// The ID token's claims beyond the standard ones (for the admin rule), with `email`
    /// (only when the provider says `email_verified: true`) and `preferred_username` (what
    /// provisioning matches a provisioned `userName` by).
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
    /// The `updated_at` of the sign-in settings the session was admitted under: the store
    /// refuses it (`PreconditionFailed`) when the settings changed meanwhile, since the
    /// change ended every session admitted under the old ones. `None`: not checked.
    pub admitted_under: Option<DateTime<Utc>>,
    /// The address the sign-in came from, for the audit log.
    pub from: Option<IpAddr>,
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
            admitted_under: None,
            from: None,
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

/// One of a customer's live console sessions, as the sessions page lists them: never its
/// token (nor the token's hash), only an id for ending it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSummary {
    pub id: uuid::Uuid,
    pub subject: String,
    pub display_name: String,
    pub created_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// Whether it is the session of the request that lists them.
    pub current: bool,
}

/// Which of a customer's other sessions an admin ends (never the admin's own: that is
/// signing out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionsToEnd {
    /// The session with this id.
    One(uuid::Uuid),
    /// Every other live session ("sign out everywhere else").
    AllOthers,
}

/// Live sessions a sessions page lists at most (the newest).
pub const MAX_LISTED_SESSIONS: u32 = 200;

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
            from: None,
        }
    }
}

/// One line of a customer's audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditEvent {
    /// Its id: where the next page of the log starts.
    pub id: uuid::Uuid,
    pub at: DateTime<Utc>,
    /// `admin`, `operator`, or `key` (a SCIM key's change: its id and name as subject and
    /// name).
    pub actor_kind: String,
    pub actor_subject: String,
    pub actor_name: String,
    /// `key.issued`, `key.revoked`; `sso.set`, `sso.cleared` (the sign-in settings);
    /// `session.signed_in`, `session.signed_out` (an admin's session); `session.ended` (an
    /// admin ended other admins' sessions, or a SCIM key's change took provisioned users
    /// out); `scim.user.created|updated|deleted`,
    /// `scim.group.created|updated|deleted` (SCIM provisioning, by the actor kind `key`).
    pub action: String,
    /// The key, for a key's line.
    pub key: Option<AuditedKey>,
    /// What else the line says (an `sso.set`: the issuer, and the sessions it ended).
    pub detail: Option<String>,
    /// The address the action came from (none for an operator's command).
    pub source_ip: Option<IpAddr>,
    /// What a SCIM line changed: the user's or group's id and name when it was written.
    pub target: Option<(uuid::Uuid, String)>,
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
    fn an_issue_forms_token_is_good_for_its_session_and_id_only() {
        let key = FormKey::derive(&[7; 32]);
        let (csrf, other) = (random_token(32).unwrap(), random_token(32).unwrap());
        let id = KeyId::generate();
        let token = key.issue_form_token(&csrf, id);
        assert_eq!(key.issue_form_key(&csrf, &token), Some(id));
        assert_eq!(
            key.issue_form_key(&other, &token),
            None,
            "another session's form"
        );
        let (_, mac) = token.split_once('.').unwrap();
        let chosen = format!("{}.{mac}", KeyId::generate());
        assert_eq!(
            key.issue_form_key(&csrf, &chosen),
            None,
            "an id of the admin's choosing"
        );
        let elsewhere = FormKey::derive(&[8; 32]).issue_form_token(&csrf, id);
        assert_eq!(
            key.issue_form_key(&csrf, &elsewhere),
            None,
            "another server key's"
        );
        for bare in [
            id.to_string(),
            "00000000-0000-0000-0000-000000000000".into(),
            String::new(),
        ] {
            assert_eq!(key.issue_form_key(&csrf, &bare), None, "{bare:?}");
        }
        assert_eq!(key.issue_form_key(&csrf, &format!("{id}.!!")), None);
    }

    #[test]
    fn csrf_tokens_compare_exactly() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
    }
}
