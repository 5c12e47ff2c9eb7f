//! Right-sized role recommendations.

use chrono::{DateTime, Utc};
use posture_domain::{CloudTenantId, recommendation::RoleRecommendation};
use schemars::JsonSchema;
use serde::Serialize;

use crate::identities::IdentitySummaryResponse;

/// The role recommended instead of the current ones.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecommendedRoleResponse {
    pub name: String,
    /// The actions (permissions) the recommended role grants.
    pub actions: Vec<String>,
}

/// What applying the recommendation takes away.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemovesResponse {
    /// Current roles other than the recommended one.
    pub roles: Vec<String>,
    /// Actions held today that the recommended role does not grant.
    pub actions: Vec<String>,
}

/// A right-sized role recommendation with its target identity.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleRecommendationResponse {
    pub id: String,
    #[schemars(schema_with = "crate::tenant_id")]
    pub cloud_tenant_id: CloudTenantId,
    /// The identity the recommendation is for.
    pub identity: IdentitySummaryResponse,
    pub current_roles: Vec<String>,
    pub recommended_role: RecommendedRoleResponse,
    pub removes: RemovesResponse,
    /// When an analyzer pass last reported it.
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
    /// When an analyzer pass last changed anything this resource shows, its embedded
    /// identity included (a re-report with nothing changed leaves it). Never goes
    /// backwards within a customer; the key of
    /// `order=modified` and `modifiedSince` (see "Keeping in sync" in docs/api.md).
    #[serde(serialize_with = "crate::time::serialize")]
    pub modified_at: DateTime<Utc>,
}

impl From<RoleRecommendation> for RoleRecommendationResponse {
    fn from(r: RoleRecommendation) -> Self {
        let removed_roles = r.removed_roles();
        Self {
            id: r.id.into_string(),
            cloud_tenant_id: r.cloud_tenant_id,
            identity: r.identity.into(),
            current_roles: r.current_roles,
            recommended_role: RecommendedRoleResponse {
                name: r.recommended_role.name,
                actions: r.recommended_role.actions,
            },
            removes: RemovesResponse {
                roles: removed_roles,
                actions: r.removed_actions,
            },
            updated_at: r.updated_at,
            modified_at: r.modified_at,
        }
    }
}
