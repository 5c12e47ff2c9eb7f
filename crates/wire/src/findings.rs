//! Findings.

use chrono::{DateTime, Utc};
use posture_domain::finding::{Finding, FindingStatus, FindingType, Severity};
use schemars::JsonSchema;
use serde::Serialize;

use crate::identities::IdentitySummaryResponse;

/// An analyzer finding. The same shape in lists, detail, exports and webhook bodies.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindingResponse {
    pub id: String,
    #[schemars(schema_with = "crate::tenant_id")]
    pub cloud_tenant_id: String,
    /// What the analyzer found (see the catalogue in docs/api.md).
    #[schemars(schema_with = "crate::closed_set::<FindingType>")]
    pub finding_type: FindingType,
    #[schemars(schema_with = "crate::closed_set::<Severity>")]
    pub severity: Severity,
    #[schemars(schema_with = "crate::closed_set::<FindingStatus>")]
    pub status: FindingStatus,
    pub title: String,
    pub description: Option<String>,
    /// The affected identity; `null` when the finding is not about one identity.
    pub identity: Option<IdentitySummaryResponse>,
    /// When the analyzer first detected it.
    pub detected_at: DateTime<Utc>,
    /// When an analyzer pass last reported it.
    pub updated_at: DateTime<Utc>,
}

impl From<Finding> for FindingResponse {
    fn from(f: Finding) -> Self {
        Self {
            id: f.id.into_string(),
            cloud_tenant_id: f.cloud_tenant_id.to_string(),
            finding_type: f.finding_type,
            severity: f.severity,
            status: f.status,
            title: f.title,
            description: f.description,
            identity: f.identity.map(Into::into),
            detected_at: f.detected_at,
            updated_at: f.updated_at,
        }
    }
}
