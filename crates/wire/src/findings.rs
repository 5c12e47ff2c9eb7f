//! Findings.

use chrono::{DateTime, Utc};
use posture_domain::{
    CloudTenantId,
    finding::{ExportFormat, Finding, FindingFilter, FindingStatus, FindingType, Severity},
    triage::TriageState,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    identities::IdentitySummaryResponse,
    query::{CommaList, OneOf},
    triage::TriageResponse,
};

/// An analyzer finding. The same shape in lists, detail, exports and webhook bodies (read
/// back by the worker from the snapshot a chunk of deliveries shares).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindingResponse {
    pub id: String,
    #[schemars(schema_with = "crate::tenant_id")]
    pub cloud_tenant_id: CloudTenantId,
    /// What the analyzer found (see the catalogue in docs/api.md).
    #[schemars(schema_with = "crate::finding_type")]
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
    #[serde(serialize_with = "crate::time::serialize")]
    pub detected_at: DateTime<Utc>,
    /// When an analyzer pass last reported it.
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
    /// When an analyzer pass or a triage last changed anything this resource shows, its
    /// embedded identity included (a re-report with nothing changed leaves it). Never goes
    /// backwards within a customer; the key of
    /// `order=modified` and `modifiedSince` (see "Keeping in sync" in docs/api.md).
    #[serde(serialize_with = "crate::time::serialize")]
    pub modified_at: DateTime<Utc>,
    /// The customer's triage (`PATCH /findings/{id}`), as it reads now.
    pub triage: TriageResponse,
}

impl From<Finding> for FindingResponse {
    fn from(f: Finding) -> Self {
        Self {
            id: f.id.into_string(),
            cloud_tenant_id: f.cloud_tenant_id,
            finding_type: f.finding_type,
            severity: f.severity,
            status: f.status,
            title: f.title,
            description: f.description,
            identity: f.identity.map(Into::into),
            detected_at: f.detected_at,
            updated_at: f.updated_at,
            modified_at: f.modified_at,
            triage: f.triage.into(),
        }
    }
}

/// The filters of `GET /findings` and of the export.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindingsQuery {
    /// Only these severities: one or more of critical, high, medium, low, comma-separated
    /// (`severity=critical,high`).
    #[serde(default)]
    pub severity: CommaList<Severity>,
    /// Only these statuses: one or more of open, resolved, suppressed, comma-separated.
    #[serde(default)]
    pub status: CommaList<FindingStatus>,
    /// Only these finding types, comma-separated (catalogue in docs/api.md; any well-formed
    /// type is accepted, including ones newer than this document).
    #[serde(default)]
    pub finding_type: CommaList<FindingType>,
    /// Only findings whose triage reads as one of these now: one or more of untriaged,
    /// acknowledged, dismissed, risk_accepted, comma-separated (an expired mark reads as
    /// untriaged).
    #[serde(default)]
    pub triage_state: CommaList<TriageState>,
}

impl FindingsQuery {
    /// The domain's filter, with the resolved tenant and `modifiedSince`.
    pub fn filter(
        self,
        tenant: Option<CloudTenantId>,
        modified_since: Option<DateTime<Utc>>,
    ) -> FindingFilter {
        FindingFilter {
            tenant,
            modified_since,
            severities: self.severity.0,
            statuses: self.status.0,
            finding_types: self.finding_type.0,
            triage_states: self.triage_state.0,
        }
    }
}

/// The line format of `GET /findings/export`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExportQuery {
    /// `ndjson` (default): one JSON finding per line, as `GET /findings` shows it. `cef`: one
    /// ArcSight CEF line per finding. `ocsf`: one OCSF 1.5.0 Detection Finding event (class
    /// 2004) per line, as NDJSON.
    #[schemars(extend("default" = "ndjson"))]
    pub format: Option<OneOf<ExportFormat>>,
}

impl ExportQuery {
    pub fn format(&self) -> ExportFormat {
        self.format.map_or(ExportFormat::Ndjson, |f| f.0)
    }
}
