//! Identities (users, groups, service principals, managed and agent identities) and their
//! role assignments.

use chrono::{DateTime, Utc};

use crate::ids::{CloudTenantId, IdentityId};

string_enum! {
    /// The kind of an identity.
    pub enum IdentityKind ("kind") {
        User = "user",
        Group = "group",
        ServicePrincipal = "servicePrincipal",
        ManagedIdentity = "managedIdentity",
        AgentIdentity = "agentIdentity",
    }
}

string_enum! {
    /// Whether a role assignment is standing (`active`) or must be activated (`eligible`).
    pub enum AssignmentType ("assignmentType") {
        Active = "active",
        Eligible = "eligible",
    }
}

/// An identity as lists show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub id: IdentityId,
    pub cloud_tenant_id: CloudTenantId,
    pub kind: IdentityKind,
    pub display_name: String,
    pub principal_name: Option<String>,
    /// When an analyzer pass first reported it.
    pub first_seen_at: DateTime<Utc>,
    /// When an analyzer pass last reported it.
    pub last_seen_at: DateTime<Utc>,
    /// When an analyzer pass last changed anything the API serves of it, role assignments
    /// included (a re-report with nothing changed leaves it).
    pub modified_at: DateTime<Utc>,
}

/// One directory role held by an identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleAssignment {
    pub role_name: String,
    /// Where the role applies (`/` for the whole directory, or an administrative unit, ...).
    pub scope: String,
    pub assignment_type: AssignmentType,
}

/// An identity with its role assignments (the detail route).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentityDetail {
    pub identity: Identity,
    pub role_assignments: Vec<RoleAssignment>,
}

/// The short form of an identity embedded in findings, recommendations and scores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentitySummary {
    pub id: IdentityId,
    pub display_name: String,
    pub kind: IdentityKind,
    pub cloud_tenant_id: CloudTenantId,
}

/// Filters of the identity list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdentityFilter {
    pub tenant: Option<CloudTenantId>,
    /// Only rows whose `modified_at` is later than this (`modifiedSince`).
    pub modified_since: Option<DateTime<Utc>>,
}

/// An identity to insert or update, from an ingest record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentityUpsert {
    pub id: IdentityId,
    pub cloud_tenant_id: CloudTenantId,
    pub kind: IdentityKind,
    pub display_name: String,
    pub principal_name: Option<String>,
    /// The identity's role assignments, which replace the stored ones (`[]`: it has none);
    /// `None` when the record does not say (`roleAssignments` absent or null): the stored
    /// ones are kept, so a record that leaves them out loses nothing.
    pub role_assignments: Option<Vec<RoleAssignment>>,
}
