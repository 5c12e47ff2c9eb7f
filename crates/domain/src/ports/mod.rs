//! Ports: what the application needs from storage, as traits.
//!
//! Adapters implement these (`posture-store-postgres` on PostgreSQL); handlers and operator
//! commands call them through `Arc<dyn ...>`. Every method that touches customer data takes
//! a [`CustomerScope`] first and must filter by it in the query itself, never afterwards.
//! Method names are unique across the traits so one adapter type can implement them all.

mod audit;
mod console;
mod scim;
mod webhooks;

use std::net::IpAddr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::{
    allow_list::AllowList,
    api_key::{ApiKey, CurrentKey, KeyHash, NewApiKey},
    console::Actor,
    credential::{CredentialUse, Principal},
    customer::{Customer, CustomerScope},
    error::Result,
    event::{EventFilter, EventPage, FindingEvent},
    finding::{Finding, FindingFilter},
    idempotency::{Claim, ClaimId, Fingerprint, IdempotencyKey, StoredAnswer},
    identity::{Identity, IdentityDetail, IdentityFilter},
    ids::{CloudTenantId, CustomerId, EventId, FindingId, IdentityId, KeyId},
    ingest::{IngestError, ParsedLine, PassSummary, RecentPasses},
    oauth::{ClientForAuth, NewClient, NewCredential, OAuthClient},
    page::{Page, PageRequest},
    recommendation::{RecommendationFilter, RoleRecommendation},
    tenant::{NewTenant, Tenant},
    triage::{TriageChange, TriageRecord},
    triage_bulk::BulkTriage,
    upr::{UprFilter, UprRollup, UprScore, UprTrendPoint},
};

pub use audit::AuditRepository;
pub use console::{ConsoleRepository, ConsoleSetup, SignInError, SignInProvider, SsoChange};
pub use scim::ScimRepository;
pub use webhooks::{
    DeliveryRepository, DirectSender, SecretRotationRepository, SentNow, StoredSecret,
    SubscriptionSecrets, WebhookRepository,
};

/// The version of what the read routes show of a customer: an unchanged version means an
/// unchanged response (conditional requests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataVersion {
    /// Changes in the same transaction as every change the reads could show (a pass, a
    /// triage write, a webhook or tenant change).
    pub changes: u64,
    /// The latest triage expiry passed that no change has recorded yet (`None`: none): a
    /// mark reads `untriaged` from its `expiresAt` on, before the worker's sweep records it,
    /// so the reads change when it passes, without a change.
    pub expired_through: Option<chrono::DateTime<chrono::Utc>>,
}

#[async_trait]
pub trait DataVersionRepository: Send + Sync {
    async fn data_version(&self, scope: CustomerScope) -> Result<DataVersion>;
}

/// How the analyzer's passes went lately, over every customer (operators' metrics only: no
/// customer's data, only counts and durations).
#[async_trait]
pub trait PassStatistics: Send + Sync {
    /// The passes finished within the last `window`.
    async fn recent_passes(&self, window: std::time::Duration) -> Result<RecentPasses>;
}

/// What customers' data takes in the shared database (operators only: the `customers
/// usage` command and the worker's gauges). Reads every row of the customers it measures.
#[async_trait]
pub trait UsageRepository: Send + Sync {
    /// Each customer's usage (`customer`'s alone when given), the largest first.
    async fn storage_usage(
        &self,
        customer: Option<CustomerId>,
    ) -> Result<Vec<crate::usage::CustomerUsage>>;

    /// Every customer's usage, as [`storage_usage`](Self::storage_usage), unless another
    /// process is measuring it at this moment (`None`): a measure reads every row, and the
    /// workers' gauges need not read them twice at once.
    async fn storage_usage_alone(&self) -> Result<Option<Vec<crate::usage::CustomerUsage>>>;
}

/// Customers (operator commands only).
#[async_trait]
pub trait CustomerRepository: Send + Sync {
    async fn create_customer(&self, name: &str) -> Result<Customer>;
    async fn list_customers(&self) -> Result<Vec<Customer>>;
}

/// Connected cloud tenants.
#[async_trait]
pub trait TenantRepository: Send + Sync {
    /// Connects a tenant to the customer, or updates its names if it is connected already.
    /// `Conflict` if it is connected to another customer.
    async fn connect_tenant(&self, scope: CustomerScope, tenant: NewTenant) -> Result<Tenant>;
    async fn list_tenants(&self, scope: CustomerScope, page: PageRequest) -> Result<Page<Tenant>>;
    /// The customer's tenant with this id; `NotFound` for an unknown or foreign one.
    async fn find_tenant(&self, scope: CustomerScope, id: CloudTenantId) -> Result<Tenant>;
}

/// Identities and their role assignments.
#[async_trait]
pub trait IdentityRepository: Send + Sync {
    async fn list_identities(
        &self,
        scope: CustomerScope,
        filter: &IdentityFilter,
        page: PageRequest,
    ) -> Result<Page<Identity>>;
    /// `NotFound` for an unknown or foreign id.
    async fn get_identity(&self, scope: CustomerScope, id: &IdentityId) -> Result<IdentityDetail>;
}

/// Analyzer findings.
#[async_trait]
pub trait FindingRepository: Send + Sync {
    /// Findings matching `filter`, most severe first, then newest detection, then id.
    async fn list_findings(
        &self,
        scope: CustomerScope,
        filter: &FindingFilter,
        page: PageRequest,
    ) -> Result<Page<Finding>>;
    /// `NotFound` for an unknown or foreign id.
    async fn get_finding(&self, scope: CustomerScope, id: &FindingId) -> Result<Finding>;
    /// The customer's findings with these ids, in the order given (unknown ids skipped).
    async fn findings_by_ids(
        &self,
        scope: CustomerScope,
        ids: &[FindingId],
    ) -> Result<Vec<Finding>>;
    /// Writes the customer's triage of a finding by the key `by`, and its history record,
    /// in one transaction; answers the finding as it is then. `expected`: the tags
    /// ([`Finding::tag`]) `If-Match` accepts (`None`: any); `PreconditionFailed` when the
    /// finding's is not among them. `NotFound` for an unknown or foreign id.
    async fn triage_finding(
        &self,
        scope: CustomerScope,
        id: &FindingId,
        change: &TriageChange,
        by: KeyId,
        expected: Option<&[String]>,
    ) -> Result<Finding>;
    /// Writes the customer's triage `change` of each finding of `items` (its id, and the
    /// tags its `ifMatch` accepts) in one transaction, as [`Self::triage_finding`] does one;
    /// a finding not found or whose tag does not hold is left and said so.
    async fn triage_findings(
        &self,
        scope: CustomerScope,
        items: &[(FindingId, Option<Vec<String>>)],
        change: &TriageChange,
        by: KeyId,
    ) -> Result<BulkTriage>;
    /// The triage history of a finding, newest first. `NotFound` for an unknown or foreign
    /// id.
    async fn triage_history(
        &self,
        scope: CustomerScope,
        id: &FindingId,
        page: PageRequest,
    ) -> Result<Page<TriageRecord>>;
    /// Records as `untriaged` the marks whose `expiresAt` has passed (at most `batch`),
    /// each as a triage change: a history record without a key, a `finding_triage_expired`
    /// event and a modification a sync carries. How many. (Reads show such a mark as
    /// `untriaged` already; the worker's sweep records it.)
    async fn expire_triage(&self, batch: u32) -> Result<u64>;
    /// Every finding matching `filter`, ordered by id, read batch by batch from one
    /// consistent snapshot (the export).
    async fn export_findings(
        &self,
        scope: CustomerScope,
        filter: &FindingFilter,
    ) -> Result<Box<dyn FindingBatches>>;
}

/// The findings of an export, batch by batch. Dropping it mid-way ends the export.
#[async_trait]
pub trait FindingBatches: Send {
    /// How many findings the export holds (from the same snapshot as the batches).
    fn total(&self) -> u64;
    /// The `modifiedAt` of the customer's newest committed pass in the export's snapshot
    /// (what a client syncing with `modifiedSince` stores next); `None` before its first pass.
    fn synced_through(&self) -> Option<chrono::DateTime<chrono::Utc>>;
    /// The next batch; `None` when every finding was returned.
    async fn next_batch(&mut self) -> Result<Option<Vec<Finding>>>;
}

/// Right-sized role recommendations.
#[async_trait]
pub trait RecommendationRepository: Send + Sync {
    /// Recommendations with their target identity, ordered by id.
    async fn list_recommendations(
        &self,
        scope: CustomerScope,
        filter: &RecommendationFilter,
        page: PageRequest,
    ) -> Result<Page<RoleRecommendation>>;
}

/// UPR scores, their rollup and trend.
#[async_trait]
pub trait UprRepository: Send + Sync {
    /// The rollup over the latest score of each principal, overall and per tenant.
    async fn upr_rollup(
        &self,
        scope: CustomerScope,
        tenant: Option<CloudTenantId>,
    ) -> Result<UprRollup>;
    /// Latest score per principal, highest first (then identity id).
    async fn list_upr_principals(
        &self,
        scope: CustomerScope,
        filter: &UprFilter,
        page: PageRequest,
    ) -> Result<Page<UprScore>>;
    /// One point per day with scores, over the last `days` days (today included), oldest
    /// first.
    async fn upr_trend(
        &self,
        scope: CustomerScope,
        tenant: Option<CloudTenantId>,
        days: u32,
    ) -> Result<Vec<UprTrendPoint>>;
}

/// API keys: issue, list and revoke (operators), authenticate (every request).
#[async_trait]
pub trait ApiKeyRepository: Send + Sync {
    /// Stores a generated key, and the issuance in the customer's audit log, together.
    /// `NotFound` if the customer does not exist.
    async fn insert_key(&self, key: NewApiKey, by: &Actor) -> Result<ApiKey>;
    async fn list_keys(&self, scope: CustomerScope) -> Result<Vec<ApiKey>>;
    /// A page of the customer's keys, newest first: the `limit` keys issued before the key
    /// `before` (from the newest without). `NotFound` when the customer has no key `before`.
    async fn list_keys_page(
        &self,
        scope: CustomerScope,
        before: Option<KeyId>,
        limit: u32,
    ) -> Result<Vec<ApiKey>>;
    /// The key `id` of the customer, with the customer's name: what a caller learns of the
    /// key it presented. `NotFound` when the customer has no such key.
    async fn current_key(&self, scope: CustomerScope, id: KeyId) -> Result<CurrentKey>;
    /// Revokes a key at once, and records it in the customer's audit log. `within`: the
    /// customer whose key it must be (the console); `None` for an operator command.
    /// `NotFound` for an unknown id (or another customer's); revoking twice keeps the first
    /// revocation time and records nothing more. The flag says whether this call revoked it.
    async fn revoke_key(
        &self,
        within: Option<CustomerScope>,
        id: KeyId,
        by: &Actor,
    ) -> Result<(ApiKey, bool)>;
    /// The principal of the key with this hash, if it is neither revoked nor expired now.
    /// Must see a revocation as soon as it is committed.
    async fn authenticate(&self, hash: &KeyHash) -> Result<Option<Principal>>;
    /// The principal of an access token posture made (`claims`, verified by the caller; the
    /// cache holds it under `hash`, [`crate::oauth::TokenClaims::principal_key`], as it holds
    /// keys): its client's, with the scopes both the token and the client hold now, if the
    /// client is neither revoked nor expired and the token has not expired. Sees a revocation as
    /// [`authenticate`](Self::authenticate) does.
    async fn authenticate_token(
        &self,
        hash: &KeyHash,
        claims: &crate::oauth::TokenClaims,
    ) -> Result<Option<Principal>>;
    /// What this process knows of the key without asking the store: a valid key it
    /// authenticated lately (and still may serve), a key it found unknown lately, or
    /// nothing. Lets the gate refuse floods of unknown keys before they cost a query.
    fn known_key(&self, _hash: &KeyHash) -> KnownKey {
        KnownKey::Unseen
    }
    /// Records a use of `principal`'s credential: its last use (when, from where, with what
    /// client), and the address in the audit log when the credential was never used from it
    /// before. Off the request's path, at most once a minute per credential, address and
    /// process; a failure is logged, never the request's. Costs a lookup in memory per
    /// request: the `User-Agent` is read only when a write is due.
    fn record_use(
        &self,
        _principal: &Principal,
        _at: DateTime<Utc>,
        _from: IpAddr,
        _user_agent: Option<&str>,
    ) {
    }
    /// Records that `principal`'s allow-list refused a request from `from` at `at`: one
    /// line of the audit log per credential, address and hour, off the request's path.
    fn record_refusal(&self, _principal: &Principal, _from: IpAddr, _at: DateTime<Utc>) {}
    /// Records that the token endpoint issued an access token to `principal`'s client: one
    /// line of the audit log per client and hour (the hour's first, with its address), off
    /// the request's path.
    fn record_tokens_issued(&self, _principal: &Principal, _used: CredentialUse) {}
    /// Records that `principal`'s credential was refused at `at` because it lapsed for
    /// inactivity: one line of the audit log per credential and hour, off the request's path.
    fn record_lapsed(&self, _principal: &Principal, _at: DateTime<Utc>) {}
    /// Sets where the key or client `id` may be used from (empty: anywhere), at once on
    /// every instance, with the change in the customer's audit log (nothing when the list
    /// is unchanged). `within`: the customer whose credential it must be (`None`: an
    /// operator). `NotFound` for an unknown id, another customer's, or a revoked one.
    async fn set_allow_list(
        &self,
        within: Option<CustomerScope>,
        id: KeyId,
        allow_from: AllowList,
        by: &Actor,
    ) -> Result<ApiKey>;
}

/// OAuth 2.0 clients: issue, list, rotate and revoke (operators and the console), and what
/// the token endpoint reads. A client shares its id, customer, scopes, revocation and
/// last use with the keys (one row of the same table): a revocation reaches its tokens as a
/// key's reaches the key.
#[async_trait]
pub trait ClientRepository: Send + Sync {
    /// Stores a generated client with its first credential, and the issuance in the
    /// customer's audit log, together. `NotFound` if the customer does not exist;
    /// `Conflict` when the customer holds as many active keys and clients as allowed.
    async fn insert_client(&self, client: NewClient, by: &Actor) -> Result<OAuthClient>;
    /// The customer's clients, oldest first, with their credentials.
    async fn list_clients(&self, scope: CustomerScope) -> Result<Vec<OAuthClient>>;
    /// One client. `within`: the customer it must belong to (`None`: an operator).
    async fn find_client(&self, within: Option<CustomerScope>, id: KeyId) -> Result<OAuthClient>;
    /// Revokes a client at once (its tokens with it), and records it in the customer's
    /// audit log; revoking twice keeps the first time. The flag says whether this call
    /// revoked it.
    async fn revoke_client(
        &self,
        within: Option<CustomerScope>,
        id: KeyId,
        by: &Actor,
    ) -> Result<(OAuthClient, bool)>;
    /// Rotation: adds `credential` to an unrevoked client, and makes every credential it
    /// held lapse at `others_until` (now, or later for an overlap; one that lapses sooner
    /// keeps its time). `Conflict` when the client would hold more than
    /// [`crate::oauth::MAX_CREDENTIALS`] credentials still valid.
    async fn add_client_credential(
        &self,
        within: Option<CustomerScope>,
        id: KeyId,
        credential: NewCredential,
        others_until: DateTime<Utc>,
        by: &Actor,
    ) -> Result<OAuthClient>;
    /// The client `id` with its credentials valid now, if it is neither revoked nor expired.
    async fn client_for_auth(&self, id: KeyId) -> Result<Option<ClientForAuth>>;
    /// Records that client `client` used assertion `jti`, kept until `until`: `false` when it
    /// was used before (a replay), whichever instance saw it.
    async fn remember_assertion(
        &self,
        client: KeyId,
        jti: &str,
        until: DateTime<Utc>,
    ) -> Result<bool>;
}

/// What a serving process knows of a presented key without asking the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KnownKey {
    /// A valid key, and whose.
    Valid(Principal),
    /// Looked up moments ago and found to be no valid key.
    Unknown,
    /// Valid when this process last saw it, but not served from memory now: only the store
    /// can tell, and the lookup is worth it whatever the caller's address did.
    Recent,
    /// Not known here: only the store can tell.
    Unseen,
}

/// Idempotency keys (`Idempotency-Key` on a POST): who holds a key, and the answers kept
/// for replay. Every key is the customer's and one API key's.
#[async_trait]
pub trait IdempotencyRepository: Send + Sync {
    /// Claims `key` for the request `fingerprint`: [`Claim::Run`] when it is unused (or
    /// forgotten, or held by a request that stopped without an answer), else what the first
    /// request left. The times (the hold, the day it is kept) are the store's, one clock
    /// for every instance.
    async fn claim_idempotency_key(
        &self,
        scope: CustomerScope,
        by: KeyId,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim>;
    /// Holds `key` for another [`crate::idempotency::IN_PROGRESS_SECS`] from now, if `claim`
    /// still holds it without an answer: a request that runs long keeps its key.
    async fn extend_idempotency_hold(
        &self,
        scope: CustomerScope,
        by: KeyId,
        key: &IdempotencyKey,
        claim: ClaimId,
    ) -> Result<()>;
    /// Keeps the answer of the request that claimed `key`, if `claim` still holds it.
    async fn keep_idempotent_answer(
        &self,
        scope: CustomerScope,
        by: KeyId,
        key: &IdempotencyKey,
        claim: ClaimId,
        answer: &StoredAnswer,
    ) -> Result<()>;
    /// Frees `key` without an answer (one not kept), if `claim` still holds it: a retry
    /// runs again.
    async fn release_idempotency_key(
        &self,
        scope: CustomerScope,
        by: KeyId,
        key: &IdempotencyKey,
        claim: ClaimId,
    ) -> Result<()>;
    /// Forgets at most `batch` keys kept until before `cutoff`; how many.
    async fn purge_idempotency_keys(
        &self,
        cutoff: chrono::DateTime<chrono::Utc>,
        batch: u32,
    ) -> Result<u64>;
}

/// The events feed (docs/api.md, "Events").
#[async_trait]
pub trait EventRepository: Send + Sync {
    /// The customer's events matching `filter`, oldest first. `NotFound` when `filter.after`
    /// names no event of the customer (or one past retention).
    async fn list_events(&self, scope: CustomerScope, filter: &EventFilter) -> Result<EventPage>;
    /// One event of the customer; `NotFound` otherwise.
    async fn get_event(&self, scope: CustomerScope, id: EventId) -> Result<FindingEvent>;
    /// Deletes events created before `cutoff`, at most `batch` of them; how many.
    async fn purge_events(&self, cutoff: chrono::DateTime<chrono::Utc>, batch: u32) -> Result<u64>;
}

/// Word that a customer's data changed (a pass committed): what a waiting feed request
/// waits for instead of asking the database again and again.
#[async_trait]
pub trait DataChanges: Send + Sync {
    /// A subscription to changes of `customer`'s data, from now on: take it before reading,
    /// then wait on it when the read found nothing new.
    fn subscribe(&self, customer: CustomerId) -> Box<dyn DataChangeSubscription>;
}

/// Changes of one customer's data, from the moment of subscribing.
#[async_trait]
pub trait DataChangeSubscription: Send {
    /// Returns when the customer's data may have changed since the subscription was taken
    /// or `changed` last returned (spurious wake-ups are allowed; a missed change is not),
    /// with the instant the change was heard: a read begun at or after it sees the change.
    async fn changed(&mut self) -> std::time::Instant;
}

/// Readiness of the store.
#[async_trait]
pub trait StoreHealth: Send + Sync {
    /// Whether the database answers.
    async fn ping(&self) -> Result<()>;
    /// Whether every migration this binary knows is applied.
    async fn schema_is_current(&self) -> Result<bool>;
}

/// Analyzer passes.
#[async_trait]
pub trait IngestRepository: Send + Sync {
    /// Runs one analyzer pass over `items` (line number, record) in one transaction: all of
    /// it is kept, or (on any error) nothing.
    async fn run_pass(
        &self,
        scope: CustomerScope,
        items: &mut (dyn Iterator<Item = Result<ParsedLine, IngestError>> + Send),
    ) -> std::result::Result<PassSummary, IngestError>;
}
