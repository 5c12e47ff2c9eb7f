//! Analyzer findings: severities, statuses, types and filters.

use chrono::{DateTime, Utc};

use crate::{
    identity::IdentitySummary,
    ids::{CloudTenantId, FindingId, IdentityId},
};

string_enum! {
    /// How bad a finding is. Declaration order is the list order (most severe first).
    pub enum Severity ("severity") {
        Critical = "critical",
        High = "high",
        Medium = "medium",
        Low = "low",
    }
}

string_enum! {
    /// Where a finding stands.
    pub enum FindingStatus ("status") {
        /// Reported by the analyzer and not dealt with.
        Open = "open",
        /// The condition no longer holds.
        Resolved = "resolved",
        /// Accepted as a known exception; not reported again.
        Suppressed = "suppressed",
    }
}

string_enum! {
    /// What the analyzer found. The catalogue is closed: an unknown type is a bad ingest line
    /// and a 400 on `?findingType=`.
    pub enum FindingType ("findingType") {
        /// A Tier-0 role (e.g. Global Administrator) assigned permanently at the root scope.
        Tier0PermanentRoot = "tier0_permanent_root",
        /// A privileged role held as standing access where just-in-time activation would do.
        StandingPrivilegedAccess = "standing_privileged_access",
        /// A privileged identity that has not signed in for 90 days or more.
        StalePrivilegedIdentity = "stale_privileged_identity",
        /// A privileged user whose sign-ins are not protected by multi-factor authentication.
        MfaNotEnforced = "mfa_not_enforced",
        /// Permissions granted but unused over the observation window.
        UnusedPermissions = "unused_permissions",
        /// An application or service principal holding high-privilege API permissions.
        ExcessiveApiPermissions = "excessive_api_permissions",
        /// A client secret or certificate valid for more than one year.
        LongLivedCredential = "long_lived_credential",
        /// A guest account holding a privileged role.
        GuestPrivilegedAccess = "guest_privileged_access",
        /// A service principal or application without any owner.
        OrphanedServicePrincipal = "orphaned_service_principal",
        /// An agent identity with more privilege than its observed actions need.
        AgentIdentityOverprivileged = "agent_identity_overprivileged",
        /// Sign-ins through legacy authentication protocols that bypass modern controls.
        LegacyAuthentication = "legacy_authentication",
    }
}

string_enum! {
    /// The line formats of the findings export.
    pub enum ExportFormat ("format") {
        /// One JSON finding per line, as the list shows it.
        Ndjson = "ndjson",
        /// One ArcSight CEF line per finding.
        Cef = "cef",
    }
}

/// A finding as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub id: FindingId,
    pub cloud_tenant_id: CloudTenantId,
    pub finding_type: FindingType,
    pub severity: Severity,
    pub status: FindingStatus,
    pub title: String,
    pub description: Option<String>,
    /// The affected identity, when the finding is about one.
    pub identity: Option<IdentitySummary>,
    /// When the analyzer first detected it.
    pub detected_at: DateTime<Utc>,
    /// When an analyzer pass last reported it.
    pub updated_at: DateTime<Utc>,
}

/// Filters of the finding list and export. Empty lists mean "any"; values within one list
/// are alternatives (OR), different filters combine (AND).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FindingFilter {
    pub tenant: Option<CloudTenantId>,
    pub severities: Vec<Severity>,
    pub statuses: Vec<FindingStatus>,
    pub finding_types: Vec<FindingType>,
}

/// A finding to insert or update, from an ingest record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FindingUpsert {
    pub id: FindingId,
    pub cloud_tenant_id: CloudTenantId,
    pub finding_type: FindingType,
    pub severity: Severity,
    pub status: FindingStatus,
    pub title: String,
    pub description: Option<String>,
    pub identity_id: Option<IdentityId>,
    /// When the analyzer detected it; the pass time when not given.
    pub detected_at: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severities_order_most_severe_first() {
        assert!(Severity::Critical < Severity::High);
        assert!(Severity::Medium < Severity::Low);
    }

    #[test]
    fn an_unknown_severity_names_the_allowed_values() {
        let err = "urgent".parse::<Severity>().unwrap_err().to_string();
        assert!(err.contains("severity"), "{err}");
        assert!(err.contains("critical, high, medium, low"), "{err}");
    }
}
