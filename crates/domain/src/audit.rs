//! The customer's audit feed (`GET /api/v1/audit-events`, the console's audit page): what
//! happened to the customer's credentials, sign-ins, settings and provisioned users, who did
//! it and from where. One store (the audit log) serves both.

use std::net::IpAddr;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::ids::KeyId;

string_enum! {
    /// What an audit event records: its `type`. Declared in the order docs/audit.md lists
    /// them.
    pub enum AuditAction ("type") {
        /// An API key was issued.
        KeyIssued = "key.issued",
        /// An API key was revoked.
        KeyRevoked = "key.revoked",
        /// An API key's allow-list was set or cleared.
        KeyAllowListChanged = "key.allow_list_changed",
        /// An API key was used from an address it had not been used from.
        KeyUsedFromNewAddress = "key.used_from_new_address",
        /// An API key was refused by its allow-list (one event per key, address and hour).
        KeyRefusedByAllowList = "key.refused_by_allow_list",
        /// An API key will stop working for inactivity within 7 days.
        KeyInactiveSoon = "key.inactive_soon",
        /// An API key was refused because it had been unused longer than the customer allows.
        KeyExpiredInactive = "key.expired_inactive",
        /// An OAuth client was issued.
        ClientIssued = "client.issued",
        /// An OAuth client's credentials were rotated.
        ClientRotated = "client.rotated",
        /// An OAuth client was revoked.
        ClientRevoked = "client.revoked",
        /// An OAuth client's allow-list was set or cleared.
        ClientAllowListChanged = "client.allow_list_changed",
        /// An OAuth client was used from an address it had not been used from.
        ClientUsedFromNewAddress = "client.used_from_new_address",
        /// An OAuth client was refused by its allow-list (one event per client, address and
        /// hour).
        ClientRefusedByAllowList = "client.refused_by_allow_list",
        /// Access tokens were issued to an OAuth client (one event per client and hour).
        ClientTokensIssued = "client.tokens_issued",
        /// An OAuth client will stop working for inactivity within 7 days.
        ClientInactiveSoon = "client.inactive_soon",
        /// An OAuth client was refused because it had been unused longer than allowed.
        ClientExpiredInactive = "client.expired_inactive",
        /// The customer's inactivity rule was set or cleared.
        InactivitySet = "inactivity.set",
        /// An admin signed in to the console.
        SessionSignedIn = "session.signed_in",
        /// A sign-in to the console was refused.
        SessionRefused = "session.refused",
        /// An admin signed out.
        SessionSignedOut = "session.signed_out",
        /// Console sessions were ended (by an admin, or by a change of who may be one).
        SessionEnded = "session.ended",
        /// The console's single sign-on or provisioning settings were set.
        SsoSet = "sso.set",
        /// The console's single sign-on settings were cleared.
        SsoCleared = "sso.cleared",
        /// SCIM created a user.
        ScimUserCreated = "scim.user.created",
        /// SCIM changed a user.
        ScimUserUpdated = "scim.user.updated",
        /// SCIM deleted a user.
        ScimUserDeleted = "scim.user.deleted",
        /// SCIM created a group.
        ScimGroupCreated = "scim.group.created",
        /// SCIM changed a group (its members added or removed, by name).
        ScimGroupUpdated = "scim.group.updated",
        /// SCIM deleted a group.
        ScimGroupDeleted = "scim.group.deleted",
    }
}

impl AuditAction {
    /// Whether the event is about one credential (a key or a client): it names it as its
    /// target.
    pub fn is_about_a_credential(self) -> bool {
        let text = self.as_str();
        text.starts_with("key.") || text.starts_with("client.")
    }

    /// The kind of credential `key` is, by its display prefix (`pci_`: a client).
    pub fn for_credential(prefix: &str, key: Self, client: Self) -> Self {
        if prefix.starts_with("pci_") {
            client
        } else {
            key
        }
    }
}

string_enum! {
    /// The line formats of the audit feed's export.
    pub enum AuditExportFormat ("format") {
        /// One JSON event per line, as the feed shows it.
        Ndjson = "ndjson",
        /// One OCSF 1.8.0 event (Authentication, Account Change or API Activity) per line.
        Ocsf = "ocsf",
    }
}

/// The id of an aggregated event: the same for every instance that writes the event of the
/// same credential, address and hour, so the log holds it once.
pub fn aggregate_id(action: AuditAction, key: KeyId, address: Option<IpAddr>, hour: i64) -> Uuid {
    let mut digest = Sha256::new();
    digest.update(action.as_str().as_bytes());
    digest.update(key.as_uuid().as_bytes());
    digest.update(
        address
            .map(|a| a.to_string())
            .unwrap_or_default()
            .as_bytes(),
    );
    digest.update(hour.to_be_bytes());
    let bytes: [u8; 16] = digest.finalize()[..16]
        .try_into()
        .expect("a SHA-256 digest holds 16 bytes");
    Uuid::new_v8(bytes)
}

/// The hour of `at`, as aggregated events count it (hours since the epoch).
pub fn hour_of(at: DateTime<Utc>) -> i64 {
    at.timestamp().div_euclid(3600)
}

/// How old a line must be before the feed serves it: a line is stamped when it is
/// inserted and read once committed, so a reader at the feed's end waits this long for the
/// lines written just before it, rather than step over one committed a moment late.
pub const AUDIT_SETTLE: chrono::TimeDelta = chrono::TimeDelta::seconds(5);

/// What a read of the feed asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only these types (none: every type).
    pub types: Vec<AuditAction>,
    /// Only events at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Events after this one (the id of the last event read).
    pub after: Option<Uuid>,
    pub limit: u32,
}

/// A page of the feed, oldest first.
#[derive(Clone, Debug, Default)]
pub struct AuditPage {
    pub events: Vec<crate::console::AuditEvent>,
    pub has_more: bool,
}

/// The audit log's retention unless the operator says otherwise
/// (`POSTURE_AUDIT_RETENTION_DAYS`, 30 to 3650): a year, the peers' norm.
pub const DEFAULT_AUDIT_RETENTION_DAYS: u32 = 365;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aggregate_id_is_one_per_credential_address_and_hour() {
        let key = KeyId::generate();
        let from: IpAddr = "198.51.100.4".parse().unwrap();
        let refused = AuditAction::KeyRefusedByAllowList;
        let id = aggregate_id(refused, key, Some(from), 7);
        assert_eq!(id, aggregate_id(refused, key, Some(from), 7));
        assert_ne!(id, aggregate_id(refused, key, Some(from), 8));
        assert_ne!(id, aggregate_id(refused, key, None, 7));
        assert_ne!(id, aggregate_id(refused, KeyId::generate(), Some(from), 7));
        assert_ne!(
            id,
            aggregate_id(AuditAction::ClientTokensIssued, key, Some(from), 7)
        );
        assert_eq!(id.get_version_num(), 8);
    }

    #[test]
    fn credential_events_name_their_kind_by_prefix() {
        use AuditAction::*;
        let pick = |prefix| AuditAction::for_credential(prefix, KeyRevoked, ClientRevoked);
        assert_eq!(pick("svc_abcdef"), KeyRevoked);
        assert_eq!(pick("pci_abcdef"), ClientRevoked);
        assert!(KeyUsedFromNewAddress.is_about_a_credential());
        assert!(!SessionSignedIn.is_about_a_credential());
        assert!(!ScimUserCreated.is_about_a_credential());
    }
}
