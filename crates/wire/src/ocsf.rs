//! Findings as OCSF 1.5.0 *Detection Finding* events (class 2004, category 2 Findings), one
//! JSON object per line (`GET /findings/export?format=ocsf`; the mapping is in
//! docs/export.md).
//!
//! The event's activity says what the finding's state is: `Close` (3) for a resolved finding,
//! `Update` (2) for one an analyzer pass reported again after detecting it, `Create` (1)
//! otherwise; `type_uid` is `2004 × 100 + activity_id`. `time` is the later of when a pass
//! last reported the finding and when anything shown of it last changed (a triage too), so
//! a consumer that keeps one line per `(uid, time)` keeps every change.
//! `finding_info.modified_time` is when it last changed, `last_seen_time` when a pass last
//! reported it. The customer's triage is OCSF's review status (`status_id`, set by the
//! consumer): acknowledged is *In Progress*, dismissed or risk accepted *Suppressed*, with
//! the reason in `status_detail`, the comment in `comment` and the whole mark in
//! `unmapped.triage`. Times are epoch milliseconds (OCSF's `timestamp_t`), with the `_dt` RFC 3339
//! twins of the date/time profile left out.

use chrono::{DateTime, Utc};
use posture_domain::{
    CloudTenantId,
    finding::{FindingStatus, FindingType, Severity},
    identity::IdentityKind,
    triage::TriageState,
};
use schemars::JsonSchema;
use serde::Serialize;

use crate::{
    findings::FindingResponse, identities::IdentitySummaryResponse, triage::TriageResponse,
};

/// The OCSF schema version the events follow.
pub const OCSF_VERSION: &str = "1.5.0";
/// Detection Finding.
const CLASS_UID: u32 = 2004;
/// Findings.
const CATEGORY_UID: u32 = 2;

/// One OCSF 1.5.0 Detection Finding event (class 2004): a line of
/// `GET /findings/export?format=ocsf`. The mapping from posture's finding is in
/// docs/export.md.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "OcsfDetectionFinding", example = sample(""))]
pub struct DetectionFinding<'a> {
    activity_id: u8,
    activity_name: &'static str,
    category_uid: u32,
    category_name: &'static str,
    class_uid: u32,
    class_name: &'static str,
    type_uid: u32,
    type_name: String,
    time: i64,
    severity_id: u8,
    severity: &'static str,
    status_id: u8,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    comment: Option<&'a str>,
    message: &'a str,
    finding_info: FindingInfo<'a>,
    resources: Vec<Resource<'a>>,
    metadata: Metadata,
    #[serde(skip_serializing_if = "Option::is_none")]
    unmapped: Option<Unmapped<'a>>,
}

/// OCSF `unmapped`: what has no attribute of the class, the finding's triage as the API
/// shows it.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "OcsfUnmapped")]
struct Unmapped<'a> {
    triage: &'a TriageResponse,
}

/// OCSF `finding_info`: the finding's id, title, type and times (epoch milliseconds).
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "OcsfFindingInfo", example = sample("/finding_info"))]
struct FindingInfo<'a> {
    uid: &'a str,
    title: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    desc: Option<&'a str>,
    types: [&'a str; 1],
    created_time: i64,
    first_seen_time: i64,
    last_seen_time: i64,
    modified_time: i64,
}

/// A resource's `uid`: an analyzer id, or a cloud tenant's GUID.
#[derive(Serialize)]
#[serde(untagged)]
enum ResourceUid<'a> {
    Id(&'a str),
    Tenant(CloudTenantId),
}

/// An OCSF resource: the identity the finding is about.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "OcsfResource", example = sample("/resources/0"))]
struct Resource<'a> {
    #[schemars(with = "String")]
    uid: ResourceUid<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(rename = "type")]
    kind: &'a str,
}

/// OCSF `metadata`: the schema version and the product that reported the finding.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "OcsfMetadata", example = sample("/metadata"))]
struct Metadata {
    version: &'static str,
    product: Product,
}

/// The OCSF product: posture, its vendor and version.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "OcsfProduct", example = sample("/metadata/product"))]
struct Product {
    name: &'static str,
    vendor_name: &'static str,
    version: &'static str,
}

/// A part (a JSON pointer) of the event of a sample finding: the contract's examples of the
/// OCSF schemas are what this mapping makes, so they cannot drift from it.
fn sample(part: &str) -> serde_json::Value {
    let tenant: CloudTenantId = "8f6e2c1a-3b4d-4e5f-9a0b-1c2d3e4f5a6b"
        .parse()
        .expect("a valid tenant id");
    let at = |text: &str| {
        DateTime::parse_from_rfc3339(text)
            .expect("a valid date")
            .to_utc()
    };
    let finding = FindingResponse {
        id: "f-7c1d9a".to_owned(),
        cloud_tenant_id: tenant,
        finding_type: FindingType::try_from("tier0_permanent_root".to_owned())
            .expect("a catalogued type"),
        severity: Severity::Critical,
        status: FindingStatus::Open,
        title: "Permanent assignment to a Tier 0 role".to_owned(),
        description: Some(
            "ada@contoso.com holds Global Administrator permanently, without PIM activation."
                .to_owned(),
        ),
        identity: Some(IdentitySummaryResponse {
            id: "9f8c2d4e-1b7a-4c3d-8e5f-6a7b8c9d0e1f".to_owned(),
            display_name: "Ada Lovelace".to_owned(),
            kind: IdentityKind::User,
            cloud_tenant_id: tenant,
        }),
        detected_at: at("2026-11-18T05:12:00Z"),
        updated_at: at("2026-11-18T05:12:00Z"),
        modified_at: at("2026-11-18T05:12:00Z"),
        triage: posture_domain::triage::Triage::default().into(),
    };
    let event = serde_json::to_value(DetectionFinding::new(&finding)).expect("an event serialises");
    event.pointer(part).cloned().unwrap_or_default()
}

fn millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// OCSF `severity_id` and its caption.
pub fn severity(severity: Severity) -> (u8, &'static str) {
    match severity {
        Severity::Critical => (5, "Critical"),
        Severity::High => (4, "High"),
        Severity::Medium => (3, "Medium"),
        Severity::Low => (2, "Low"),
    }
}

/// OCSF finding `status_id` and its caption: the analyzer's status, and for an open finding
/// the customer's review of it (its triage).
pub fn status(status: FindingStatus, triage: TriageState) -> (u8, &'static str) {
    match (status, triage) {
        (FindingStatus::Resolved, _) => (4, "Resolved"),
        (FindingStatus::Suppressed, _)
        | (_, TriageState::Dismissed | TriageState::RiskAccepted) => (3, "Suppressed"),
        (FindingStatus::Open, TriageState::Acknowledged) => (2, "In Progress"),
        (FindingStatus::Open, TriageState::Untriaged) => (1, "New"),
    }
}

impl<'a> DetectionFinding<'a> {
    /// The event of one finding as the API shows it.
    pub fn new(f: &'a FindingResponse) -> Self {
        let (activity_id, activity_name) = match f.status {
            FindingStatus::Resolved => (3, "Close"),
            _ if f.updated_at > f.detected_at => (2, "Update"),
            _ => (1, "Create"),
        };
        let (severity_id, severity) = severity(f.severity);
        let (status_id, status) = status(f.status, f.triage.state);
        let triaged = f.triage.state != TriageState::Untriaged;
        let status_detail = triaged.then(|| match f.triage.reason {
            Some(reason) => format!("{}: {}", f.triage.state.as_str(), reason.as_str()),
            None => f.triage.state.as_str().to_owned(),
        });
        let mut resources = Vec::with_capacity(2);
        if let Some(identity) = &f.identity {
            resources.push(Resource {
                uid: ResourceUid::Id(&identity.id),
                name: Some(&identity.display_name),
                kind: identity.kind.as_str(),
            });
        }
        resources.push(Resource {
            uid: ResourceUid::Tenant(f.cloud_tenant_id),
            name: None,
            kind: "cloudTenant",
        });
        Self {
            activity_id,
            activity_name,
            category_uid: CATEGORY_UID,
            category_name: "Findings",
            class_uid: CLASS_UID,
            class_name: "Detection Finding",
            type_uid: CLASS_UID * 100 + u32::from(activity_id),
            type_name: format!("Detection Finding: {activity_name}"),
            time: millis(f.updated_at.max(f.modified_at)),
            severity_id,
            severity,
            status_id,
            status,
            status_detail,
            comment: f.triage.comment.as_deref(),
            message: &f.title,
            finding_info: FindingInfo {
                uid: &f.id,
                title: &f.title,
                desc: f.description.as_deref(),
                types: [f.finding_type.as_str()],
                created_time: millis(f.detected_at),
                first_seen_time: millis(f.detected_at),
                last_seen_time: millis(f.updated_at),
                modified_time: millis(f.modified_at),
            },
            resources,
            metadata: Metadata {
                version: OCSF_VERSION,
                product: Product {
                    name: "posture",
                    vendor_name: "posture",
                    version: env!("CARGO_PKG_VERSION"),
                },
            },
            unmapped: triaged.then_some(Unmapped { triage: &f.triage }),
        }
    }
}
