//! The customer console's ports: its sign-in settings, sign-ins, sessions and audit log,
//! and the customer's OpenID Connect provider spoken to as a relying party.

use async_trait::async_trait;

use crate::{
    console::{
        Actor, Admission, AuditEvent, ClientSecret, ConsoleSession, NewSession, PendingSignIn,
        ProvisionedSignIn, Provisioning, SessionPolicy, SessionSummary, SessionsToEnd, SignInStart,
        SignedInUser, SsoConfig, SsoSettings,
    },
    customer::CustomerScope,
    error::Result,
    ids::CustomerId,
    secrets::SealedSecret,
};

/// A customer's console sign-in configuration, with what the sign-in pages show.
#[derive(Clone, Debug)]
pub struct ConsoleSetup {
    pub customer_name: String,
    pub sso: SsoConfig,
    pub sealed_secret: SealedSecret,
}

/// What setting a customer's identity provider did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SsoChange {
    pub sso: SsoConfig,
    /// Console sessions ended because who can be an admin changed.
    pub sessions_ended: u64,
}

/// The customer console: single sign-on settings, sign-ins, sessions, the audit log.
#[async_trait]
pub trait ConsoleRepository: Send + Sync {
    /// Sets (or replaces) the customer's identity provider; when that changes who can be an
    /// admin (the issuer or the admin rule), ends the customer's console sessions. Written
    /// to the customer's audit log. `NotFound` for no such customer.
    async fn set_sso(
        &self,
        scope: CustomerScope,
        settings: &SsoSettings,
        sealed_secret: SealedSecret,
    ) -> Result<SsoChange>;
    /// Requires provisioning for the customer's console (`Some`), or stops requiring it;
    /// a change ends the customer's console sessions (who may be an admin changed) and is
    /// written to the audit log. `NotFound` when the customer has no identity provider.
    async fn set_provisioning(
        &self,
        scope: CustomerScope,
        provisioning: Option<&Provisioning>,
    ) -> Result<SsoChange>;
    /// The customer's console setup; `None` when the customer does not exist or has no
    /// identity provider (the console does not tell the two apart).
    async fn console_setup(&self, scope: CustomerScope) -> Result<Option<ConsoleSetup>>;
    /// Removes the identity provider and ends every session (written to the customer's
    /// audit log); the sessions ended, `None` if there was no provider.
    async fn clear_sso(&self, scope: CustomerScope) -> Result<Option<u64>>;
    /// Keeps a sign-in for its callback, under the hash of its browser binding. Drops the
    /// customer's expired sign-ins, and the oldest past the bound on pending ones.
    async fn begin_sign_in(
        &self,
        scope: CustomerScope,
        binding_hash: [u8; 32],
        pending: &PendingSignIn,
    ) -> Result<()>;
    /// Takes (and deletes) the sign-in with this binding, if it is younger than its
    /// lifetime.
    async fn take_sign_in(
        &self,
        scope: CustomerScope,
        binding_hash: [u8; 32],
    ) -> Result<Option<PendingSignIn>>;
    /// Stores a new session; ends the one it replaces (the browser's previous session of
    /// this customer, by token hash), and drops the customer's expired sessions.
    async fn create_session(&self, session: &NewSession, replaces: Option<[u8; 32]>) -> Result<()>;
    /// As [`Self::create_session`], for a customer that requires provisioning: only when the
    /// provisioned user `sign_in` names is active and a member of the admin group, checked
    /// and stored in one transaction that holds both rows against a concurrent SCIM change
    /// (which then ends the new session). Any other admission starts no session.
    async fn create_provisioned_session(
        &self,
        session: &NewSession,
        replaces: Option<[u8; 32]>,
        sign_in: &ProvisionedSignIn,
    ) -> Result<Admission>;
    /// The live session with this token hash, marked used now. `None` when unknown, ended,
    /// idle longer than the policy allows or past its absolute expiry.
    async fn live_session(
        &self,
        scope: CustomerScope,
        token_hash: [u8; 32],
        policy: SessionPolicy,
    ) -> Result<Option<ConsoleSession>>;
    /// Ends a session (sign-out).
    async fn end_session(&self, scope: CustomerScope, token_hash: [u8; 32]) -> Result<()>;
    /// The customer's live sessions (newest first, at most
    /// [`crate::console::MAX_LISTED_SESSIONS`]), the
    /// one with `current` (a token hash) marked.
    async fn live_sessions(
        &self,
        scope: CustomerScope,
        policy: SessionPolicy,
        current: [u8; 32],
    ) -> Result<Vec<SessionSummary>>;
    /// Ends live sessions (live by `policy`) other than `own` (the token hash of the
    /// session of `by`), written to the customer's audit log when any ended; how many ended.
    async fn end_sessions(
        &self,
        scope: CustomerScope,
        own: [u8; 32],
        which: SessionsToEnd,
        policy: SessionPolicy,
        by: &Actor,
    ) -> Result<u64>;
    /// A page of the customer's audit log, newest first: the `limit` lines older than the
    /// line `before` (from its first line without). `NotFound` when the customer has no
    /// line `before`.
    /// Records in the customer's audit log (`session.refused`) that `who`, identified by
    /// the customer's identity provider, was refused a session, and why.
    async fn record_refused_sign_in(
        &self,
        scope: CustomerScope,
        who: &Actor,
        reason: &str,
    ) -> Result<()>;
    async fn audit_log(
        &self,
        scope: CustomerScope,
        before: Option<uuid::Uuid>,
        limit: u32,
    ) -> Result<Vec<AuditEvent>>;
    /// Every customer's client secret sealed with another key than `current_key_id` (one
    /// row per customer with a console; operator command `secrets reseal`).
    async fn client_secrets_sealed_with_other_keys(
        &self,
        current_key_id: &str,
    ) -> Result<Vec<(CustomerId, SealedSecret)>>;
    /// Stores `resealed` in place of `previous` if the row still holds `previous`.
    async fn replace_client_secret(
        &self,
        customer: CustomerId,
        previous: &SealedSecret,
        resealed: &SealedSecret,
    ) -> Result<bool>;
}

/// Why a sign-in at the identity provider did not yield a user.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    /// The provider could not be reached or answered nonsense (discovery, keys, token).
    #[error("the identity provider is unavailable: {0}")]
    Provider(String),
    /// The provider's answer did not verify (signature, issuer, audience, nonce, expiry).
    #[error("the identity provider's answer did not verify: {0}")]
    Rejected(String),
}

/// A customer's OpenID Connect provider, spoken to as a relying party.
#[async_trait]
pub trait SignInProvider: Send + Sync {
    /// Where to send the browser (authorization code flow with PKCE), and what to keep.
    async fn start_sign_in(
        &self,
        sso: &SsoConfig,
        redirect_uri: &str,
    ) -> std::result::Result<SignInStart, SignInError>;
    /// Redeems the code, verifies the ID token against the pending sign-in, and says who
    /// signed in.
    async fn finish_sign_in(
        &self,
        sso: &SsoConfig,
        secret: &ClientSecret,
        redirect_uri: &str,
        code: &str,
        pending: &PendingSignIn,
    ) -> std::result::Result<SignedInUser, SignInError>;
}
