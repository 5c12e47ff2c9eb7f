//! The records of the ingest format as serde reads them, and their validation into
//! [`IngestItem`]s. A field a record does not know (an analyzer newer than posture) is kept
//! out of the API and counted; a known field with a bad value rejects the line.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::{
    IngestItem, MAX_DESCRIPTION_LEN, MAX_LIST_LEN, MAX_NAME_LEN, MAX_SCOPE_LEN, MAX_TITLE_LEN,
};
use crate::{
    error::Error,
    finding::{FindingStatus, FindingType, FindingUpsert, Severity},
    identity::{AssignmentType, IdentityKind, IdentityUpsert, RoleAssignment},
    ids::{CloudTenantId, FindingId, IdentityId, RecommendationId},
    recommendation::{RecommendationUpsert, RecommendedRole},
    tenant::NewTenant,
    upr::{MAX_FACTORS, MAX_SCORE, UprFactors, UprScoreUpsert},
};

/// The fields of a record that posture does not know, by name.
#[derive(Default, Deserialize)]
#[serde(transparent)]
struct Unknown(BTreeMap<String, serde::de::IgnoredAny>);

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(super) enum Record {
    Tenant(TenantRecord),
    Identity(IdentityRecord),
    Finding(FindingRecord),
    RoleRecommendation(RecommendationRecord),
    UprScore(UprScoreRecord),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TenantRecord {
    cloud_tenant_id: CloudTenantId,
    display_name: String,
    primary_domain: Option<String>,
    #[serde(flatten)]
    unknown: Unknown,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct IdentityRecord {
    id: IdentityId,
    cloud_tenant_id: CloudTenantId,
    kind: IdentityKind,
    display_name: String,
    principal_name: Option<String>,
    #[serde(default)]
    role_assignments: Option<Vec<RoleAssignmentRecord>>,
    #[serde(flatten)]
    unknown: Unknown,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RoleAssignmentRecord {
    role_name: String,
    #[serde(default = "root_scope")]
    scope: String,
    #[serde(default = "active")]
    assignment_type: AssignmentType,
}

fn root_scope() -> String {
    "/".to_owned()
}

fn active() -> AssignmentType {
    AssignmentType::Active
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FindingRecord {
    id: FindingId,
    cloud_tenant_id: CloudTenantId,
    finding_type: FindingType,
    severity: Severity,
    #[serde(default = "open")]
    status: FindingStatus,
    title: String,
    description: Option<String>,
    identity_id: Option<IdentityId>,
    detected_at: Option<DateTime<Utc>>,
    #[serde(flatten)]
    unknown: Unknown,
}

fn open() -> FindingStatus {
    FindingStatus::Open
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RecommendationRecord {
    id: RecommendationId,
    cloud_tenant_id: CloudTenantId,
    identity_id: IdentityId,
    current_roles: Vec<String>,
    recommended_role: RecommendedRoleRecord,
    #[serde(default)]
    removed_actions: Vec<String>,
    #[serde(flatten)]
    unknown: Unknown,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecommendedRoleRecord {
    name: String,
    #[serde(default)]
    actions: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct UprScoreRecord {
    identity_id: IdentityId,
    cloud_tenant_id: CloudTenantId,
    score: u8,
    #[serde(default)]
    factors: UprFactors,
    recorded_at: Option<DateTime<Utc>>,
    #[serde(flatten)]
    unknown: Unknown,
}

impl Record {
    /// The fields of the record posture does not know.
    pub(super) fn unknown_fields(&self) -> Vec<String> {
        let unknown = match self {
            Record::Tenant(r) => &r.unknown,
            Record::Identity(r) => &r.unknown,
            Record::Finding(r) => &r.unknown,
            Record::RoleRecommendation(r) => &r.unknown,
            Record::UprScore(r) => &r.unknown,
        };
        unknown.0.keys().cloned().collect()
    }

    pub(super) fn validate(self) -> Result<IngestItem, Error> {
        Ok(match self {
            Record::Tenant(t) => IngestItem::Tenant(NewTenant {
                cloud_tenant_id: t.cloud_tenant_id,
                display_name: text("displayName", t.display_name, MAX_NAME_LEN)?,
                primary_domain: optional_text("primaryDomain", t.primary_domain, MAX_NAME_LEN)?,
            }),
            Record::Identity(i) => IngestItem::Identity(IdentityUpsert {
                id: i.id,
                cloud_tenant_id: i.cloud_tenant_id,
                kind: i.kind,
                display_name: text("displayName", i.display_name, MAX_NAME_LEN)?,
                principal_name: optional_text("principalName", i.principal_name, MAX_NAME_LEN)?,
                role_assignments: i
                    .role_assignments
                    .map(|given| {
                        list("roleAssignments", given, |a| {
                            Ok(RoleAssignment {
                                role_name: text(
                                    "roleAssignments.roleName",
                                    a.role_name,
                                    MAX_NAME_LEN,
                                )?,
                                scope: text("roleAssignments.scope", a.scope, MAX_SCOPE_LEN)?,
                                assignment_type: a.assignment_type,
                            })
                        })
                    })
                    .transpose()?,
            }),
            Record::Finding(f) => IngestItem::Finding(FindingUpsert {
                id: f.id,
                cloud_tenant_id: f.cloud_tenant_id,
                finding_type: f.finding_type,
                severity: f.severity,
                status: f.status,
                title: text("title", f.title, MAX_TITLE_LEN)?,
                description: optional_text("description", f.description, MAX_DESCRIPTION_LEN)?,
                identity_id: f.identity_id,
                detected_at: f.detected_at,
            }),
            Record::RoleRecommendation(r) => IngestItem::RoleRecommendation(recommendation(r)?),
            Record::UprScore(u) => IngestItem::UprScore(upr_score(u)?),
        })
    }
}

/// A role recommendation: at least one current role, names and actions bounded.
fn recommendation(r: RecommendationRecord) -> Result<RecommendationUpsert, Error> {
    if r.current_roles.is_empty() {
        return Err(Error::invalid("currentRoles", "must not be empty"));
    }
    Ok(RecommendationUpsert {
        id: r.id,
        cloud_tenant_id: r.cloud_tenant_id,
        identity_id: r.identity_id,
        current_roles: names("currentRoles", r.current_roles, MAX_NAME_LEN)?,
        recommended_role: RecommendedRole {
            name: text(
                "recommendedRole.name",
                r.recommended_role.name,
                MAX_NAME_LEN,
            )?,
            actions: names(
                "recommendedRole.actions",
                r.recommended_role.actions,
                MAX_SCOPE_LEN,
            )?,
        },
        removed_actions: names("removedActions", r.removed_actions, MAX_SCOPE_LEN)?,
    })
}

/// A UPR score: the score and each factor's points 0 to [`MAX_SCORE`], at most
/// [`MAX_FACTORS`] factors named by 1 to 64 letters, digits and `_`.
fn upr_score(u: UprScoreRecord) -> Result<UprScoreUpsert, Error> {
    if u.score > MAX_SCORE {
        return Err(Error::invalid("score", format!("must be 0 to {MAX_SCORE}")));
    }
    if u.factors.len() > MAX_FACTORS {
        return Err(Error::invalid("factors", format!("at most {MAX_FACTORS}")));
    }
    for (name, points) in &u.factors {
        if name.is_empty()
            || name.len() > 64
            || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(Error::invalid(
                "factors",
                format!("{name:?} is not a factor name (1 to 64 letters, digits, _)"),
            ));
        }
        if *points > MAX_SCORE {
            return Err(Error::invalid(
                "factors",
                format!("{name} must be 0 to {MAX_SCORE}"),
            ));
        }
    }
    Ok(UprScoreUpsert {
        identity_id: u.identity_id,
        cloud_tenant_id: u.cloud_tenant_id,
        score: u.score,
        factors: u.factors,
        recorded_at: u.recorded_at,
    })
}

/// A required string: not blank, at most `max` characters, no NUL (PostgreSQL text cannot
/// hold it).
fn text(field: &'static str, value: String, max: usize) -> Result<String, Error> {
    if value.trim().is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if value.chars().count() > max {
        return Err(Error::invalid(
            field,
            format!("must be at most {max} characters"),
        ));
    }
    if value.contains('\0') {
        return Err(Error::invalid(field, "must not contain NUL characters"));
    }
    Ok(value)
}

fn optional_text(
    field: &'static str,
    value: Option<String>,
    max: usize,
) -> Result<Option<String>, Error> {
    value.map(|v| text(field, v, max)).transpose()
}

fn list<T, U>(
    field: &'static str,
    items: Vec<T>,
    each: impl FnMut(T) -> Result<U, Error>,
) -> Result<Vec<U>, Error> {
    if items.len() > MAX_LIST_LEN {
        return Err(Error::invalid(
            field,
            format!("at most {MAX_LIST_LEN} entries"),
        ));
    }
    items.into_iter().map(each).collect()
}

fn names(field: &'static str, items: Vec<String>, max: usize) -> Result<Vec<String>, Error> {
    list(field, items, |s| text(field, s, max))
}
