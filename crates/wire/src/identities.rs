//! Identities.

use chrono::{DateTime, Utc};
use posture_domain::{
    CloudTenantId,
    identity::{
        AssignmentType, Identity, IdentityDetail, IdentityKind, IdentitySummary, RoleAssignment,
    },
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An identity (user, group, service principal, managed identity or agent identity).
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdentityResponse {
    pub id: String,
    #[schemars(schema_with = "crate::tenant_id")]
    pub cloud_tenant_id: CloudTenantId,
    #[schemars(schema_with = "crate::closed_set::<IdentityKind>")]
    pub kind: IdentityKind,
    pub display_name: String,
    /// Sign-in name (user principal name or application id URI), when the analyzer gave one.
    pub principal_name: Option<String>,
    /// When an analyzer pass first reported the identity.
    #[serde(serialize_with = "crate::time::serialize")]
    pub first_seen_at: DateTime<Utc>,
    /// When an analyzer pass last reported the identity.
    #[serde(serialize_with = "crate::time::serialize")]
    pub last_seen_at: DateTime<Utc>,
    /// When an analyzer pass last changed anything this identity shows, its role
    /// assignments included (a re-report with nothing changed leaves it). Never goes
    /// backwards within a customer; the key of `order=modified` and `modifiedSince`.
    #[serde(serialize_with = "crate::time::serialize")]
    pub modified_at: DateTime<Utc>,
}

impl From<Identity> for IdentityResponse {
    fn from(i: Identity) -> Self {
        Self {
            id: i.id.into_string(),
            cloud_tenant_id: i.cloud_tenant_id,
            kind: i.kind,
            display_name: i.display_name,
            principal_name: i.principal_name,
            first_seen_at: i.first_seen_at,
            last_seen_at: i.last_seen_at,
            modified_at: i.modified_at,
        }
    }
}

/// A directory role held by an identity.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleAssignmentResponse {
    pub role_name: String,
    /// Where the role applies: `/` for the whole directory, or a narrower scope.
    pub scope: String,
    /// `active` (standing) or `eligible` (activated just in time).
    #[schemars(schema_with = "crate::closed_set::<AssignmentType>")]
    pub assignment_type: AssignmentType,
}

impl From<RoleAssignment> for RoleAssignmentResponse {
    fn from(a: RoleAssignment) -> Self {
        Self {
            role_name: a.role_name,
            scope: a.scope,
            assignment_type: a.assignment_type,
        }
    }
}

/// An identity with its role assignments (`GET /identities/{id}`).
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdentityDetailResponse {
    #[serde(flatten)]
    pub identity: IdentityResponse,
    pub role_assignments: Vec<RoleAssignmentResponse>,
}

impl From<IdentityDetail> for IdentityDetailResponse {
    fn from(d: IdentityDetail) -> Self {
        Self {
            identity: d.identity.into(),
            role_assignments: d.role_assignments.into_iter().map(Into::into).collect(),
        }
    }
}

/// The short form of an identity inside findings, recommendations and scores.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdentitySummaryResponse {
    pub id: String,
    pub display_name: String,
    #[schemars(schema_with = "crate::closed_set::<IdentityKind>")]
    pub kind: IdentityKind,
    #[schemars(schema_with = "crate::tenant_id")]
    pub cloud_tenant_id: CloudTenantId,
}

impl From<IdentitySummary> for IdentitySummaryResponse {
    fn from(s: IdentitySummary) -> Self {
        Self {
            id: s.id.into_string(),
            display_name: s.display_name,
            kind: s.kind,
            cloud_tenant_id: s.cloud_tenant_id,
        }
    }
}
