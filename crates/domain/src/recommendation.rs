//! Right-sized role recommendations.

use chrono::{DateTime, Utc};

use crate::{
    identity::IdentitySummary,
    ids::{CloudTenantId, IdentityId, RecommendationId},
};

/// The role the analyzer recommends instead of the current ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecommendedRole {
    pub name: String,
    /// The actions (permissions) the recommended role grants.
    pub actions: Vec<String>,
}

/// A right-sized role recommendation with its target identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleRecommendation {
    pub id: RecommendationId,
    pub cloud_tenant_id: CloudTenantId,
    pub identity: IdentitySummary,
    pub current_roles: Vec<String>,
    pub recommended_role: RecommendedRole,
    /// Actions the identity holds today that the recommended role does not grant.
    pub removed_actions: Vec<String>,
    pub updated_at: DateTime<Utc>,
    /// When an analyzer pass last changed anything the API serves of it (a re-report with
    /// nothing changed leaves it).
    pub modified_at: DateTime<Utc>,
}

impl RoleRecommendation {
    /// Current roles that applying the recommendation takes away.
    pub fn removed_roles(&self) -> Vec<String> {
        self.current_roles
            .iter()
            .filter(|r| **r != self.recommended_role.name)
            .cloned()
            .collect()
    }
}

/// A recommendation to insert or update, from an ingest record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecommendationUpsert {
    pub id: RecommendationId,
    pub cloud_tenant_id: CloudTenantId,
    pub identity_id: IdentityId,
    pub current_roles: Vec<String>,
    pub recommended_role: RecommendedRole,
    pub removed_actions: Vec<String>,
}

/// Filters of the recommendation list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecommendationFilter {
    pub tenant: Option<CloudTenantId>,
    /// Only rows whose `modified_at` is later than this (`modifiedSince`).
    pub modified_since: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_roles_are_the_current_roles_other_than_the_recommended_one() {
        let rec = RoleRecommendation {
            id: "r1".parse().unwrap(),
            cloud_tenant_id: "8f6e2c1a-3b4d-4e5f-9a0b-1c2d3e4f5a6b".parse().unwrap(),
            identity: IdentitySummary {
                id: "i1".parse().unwrap(),
                display_name: "svc".into(),
                kind: crate::identity::IdentityKind::ServicePrincipal,
                cloud_tenant_id: "8f6e2c1a-3b4d-4e5f-9a0b-1c2d3e4f5a6b".parse().unwrap(),
            },
            current_roles: vec!["Owner".into(), "Reader".into()],
            recommended_role: RecommendedRole {
                name: "Reader".into(),
                actions: vec![],
            },
            removed_actions: vec![],
            updated_at: Utc::now(),
            modified_at: Utc::now(),
        };
        assert_eq!(rec.removed_roles(), vec!["Owner".to_owned()]);
    }
}
