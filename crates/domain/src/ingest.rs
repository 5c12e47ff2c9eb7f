//! The ingest format (JSON Lines, one record per line, discriminated by `type`) and the rules
//! of an analyzer pass that need no database.
//!
//! [`parse_line`] turns one line into a validated [`IngestItem`]. [`PassState`] follows a
//! pass line by line: data records must name a tenant connected to the customer (in the
//! database or by an earlier `tenant` record of the same pass); identity references may
//! point forward and are resolved at the end of the pass, reported with the line that made
//! them. Unknown fields are ignored (kept out of the API).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::{
    error::Error,
    finding::{FindingStatus, FindingType, FindingUpsert, Severity},
    identity::{AssignmentType, IdentityKind, IdentityUpsert, RoleAssignment},
    ids::{CloudTenantId, FindingId, IdentityId, PassId, RecommendationId},
    recommendation::{RecommendationUpsert, RecommendedRole},
    tenant::NewTenant,
    upr::{MAX_FACTORS, MAX_SCORE, UprFactors, UprScoreUpsert},
};

/// Longest display name, principal name, role name or domain.
pub const MAX_NAME_LEN: usize = 256;
/// Longest finding title.
pub const MAX_TITLE_LEN: usize = 512;
/// Longest finding description.
pub const MAX_DESCRIPTION_LEN: usize = 8192;
/// Longest role-assignment scope or action.
pub const MAX_SCOPE_LEN: usize = 1024;
/// Most entries in any list of a record (role assignments, roles, actions).
pub const MAX_LIST_LEN: usize = 1000;
/// Longest line accepted.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// One validated ingest record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IngestItem {
    Tenant(NewTenant),
    Identity(IdentityUpsert),
    Finding(FindingUpsert),
    RoleRecommendation(RecommendationUpsert),
    UprScore(UprScoreUpsert),
}

impl IngestItem {
    /// The tenant a data record belongs to (`None` for tenant records themselves).
    fn data_tenant(&self) -> Option<CloudTenantId> {
        match self {
            IngestItem::Tenant(_) => None,
            IngestItem::Identity(i) => Some(i.cloud_tenant_id),
            IngestItem::Finding(f) => Some(f.cloud_tenant_id),
            IngestItem::RoleRecommendation(r) => Some(r.cloud_tenant_id),
            IngestItem::UprScore(u) => Some(u.cloud_tenant_id),
        }
    }

    /// The identity a record refers to, if any.
    fn identity_reference(&self) -> Option<&IdentityId> {
        match self {
            IngestItem::Finding(f) => f.identity_id.as_ref(),
            IngestItem::RoleRecommendation(r) => Some(&r.identity_id),
            IngestItem::UprScore(u) => Some(&u.identity_id),
            IngestItem::Tenant(_) | IngestItem::Identity(_) => None,
        }
    }
}

/// Why a pass was rejected. Nothing of a rejected pass is kept.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// A line is invalid or breaks a rule of the pass.
    #[error("line {line}: {reason}")]
    Line { line: u64, reason: String },
    /// The input could not be read.
    #[error("reading line {line} of the input failed")]
    Input {
        line: u64,
        #[source]
        source: crate::error::BoxError,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] Error),
}

impl IngestError {
    pub fn line(line: u64, reason: impl Into<String>) -> Self {
        IngestError::Line {
            line,
            reason: reason.into(),
        }
    }
}

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassCounts {
    pub tenants: u64,
    pub identities: u64,
    pub findings: u64,
    /// Findings whose id was new to the customer.
    pub new_findings: u64,
    pub role_recommendations: u64,
    pub upr_scores: u64,
    /// Webhook deliveries queued for the new findings.
    pub deliveries: u64,
}

/// The result of a committed pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassSummary {
    pub pass_id: PassId,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub counts: PassCounts,
    /// Time spent queueing webhook deliveries (part of the pass).
    pub fan_out: std::time::Duration,
}

/// Parses and validates one line. `Ok(None)` for a blank line.
pub fn parse_line(line: &str) -> Result<Option<IngestItem>, String> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    if line.len() > MAX_LINE_BYTES {
        return Err(format!("line is longer than {MAX_LINE_BYTES} bytes"));
    }
    let record: Record = serde_json::from_str(line).map_err(|e| {
        // serde_json counts lines within the text, always 1 here: keep only the column.
        let message = e.to_string();
        match message.rsplit_once(" at line ") {
            Some((what, _)) => format!("{what} (column {})", e.column()),
            None => message,
        }
    })?;
    record.validate().map(Some).map_err(|e| match e {
        Error::Invalid { field, reason } => format!("{field}: {reason}"),
        other => other.to_string(),
    })
}

/// Numbers and parses lines (1-based), skipping blank ones: what a pass consumes. `lines`
/// yields each line or the error of reading it.
pub fn numbered_items<E: Into<crate::error::BoxError>>(
    lines: impl Iterator<Item = Result<String, E>>,
) -> impl Iterator<Item = Result<(u64, IngestItem), IngestError>> {
    lines.zip(1u64..).filter_map(|(line, number)| match line {
        Err(e) => Some(Err(IngestError::Input {
            line: number,
            source: e.into(),
        })),
        Ok(text) => match parse_line(&text) {
            Ok(Some(item)) => Some(Ok((number, item))),
            Ok(None) => None,
            Err(reason) => Some(Err(IngestError::line(number, reason))),
        },
    })
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum Record {
    Tenant(TenantRecord),
    Identity(IdentityRecord),
    Finding(FindingRecord),
    RoleRecommendation(RecommendationRecord),
    UprScore(UprScoreRecord),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TenantRecord {
    cloud_tenant_id: CloudTenantId,
    display_name: String,
    primary_domain: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IdentityRecord {
    id: IdentityId,
    cloud_tenant_id: CloudTenantId,
    kind: IdentityKind,
    display_name: String,
    principal_name: Option<String>,
    #[serde(default)]
    role_assignments: Vec<RoleAssignmentRecord>,
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
struct FindingRecord {
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
}

fn open() -> FindingStatus {
    FindingStatus::Open
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecommendationRecord {
    id: RecommendationId,
    cloud_tenant_id: CloudTenantId,
    identity_id: IdentityId,
    current_roles: Vec<String>,
    recommended_role: RecommendedRoleRecord,
    #[serde(default)]
    removed_actions: Vec<String>,
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
struct UprScoreRecord {
    identity_id: IdentityId,
    cloud_tenant_id: CloudTenantId,
    score: u8,
    #[serde(default)]
    factors: UprFactors,
    recorded_at: Option<DateTime<Utc>>,
}

impl Record {
    fn validate(self) -> Result<IngestItem, Error> {
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
                role_assignments: list("roleAssignments", i.role_assignments, |a| {
                    Ok(RoleAssignment {
                        role_name: text("roleAssignments.roleName", a.role_name, MAX_NAME_LEN)?,
                        scope: text("roleAssignments.scope", a.scope, MAX_SCOPE_LEN)?,
                        assignment_type: a.assignment_type,
                    })
                })?,
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
            Record::RoleRecommendation(r) => {
                if r.current_roles.is_empty() {
                    return Err(Error::invalid("currentRoles", "must not be empty"));
                }
                IngestItem::RoleRecommendation(RecommendationUpsert {
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
            Record::UprScore(u) => {
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
                IngestItem::UprScore(UprScoreUpsert {
                    identity_id: u.identity_id,
                    cloud_tenant_id: u.cloud_tenant_id,
                    score: u.score,
                    factors: u.factors,
                    recorded_at: u.recorded_at,
                })
            }
        })
    }
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

/// The rules of one pass that need no database.
#[derive(Debug, Default)]
pub struct PassState {
    tenants: HashSet<CloudTenantId>,
    identities: HashSet<IdentityId>,
    /// Identities referenced before (or without) being seen in this pass: first line.
    references: HashMap<IdentityId, u64>,
}

impl PassState {
    /// A pass of a customer whose connected tenants are `connected`.
    pub fn new(connected: impl IntoIterator<Item = CloudTenantId>) -> Self {
        Self {
            tenants: connected.into_iter().collect(),
            ..Self::default()
        }
    }

    /// A `tenant` record connected this tenant to the customer.
    pub fn connect_tenant(&mut self, tenant: CloudTenantId) {
        self.tenants.insert(tenant);
    }

    /// Checks a data record against what the pass knows so far.
    pub fn check(&mut self, line: u64, item: &IngestItem) -> Result<(), IngestError> {
        if let Some(tenant) = item.data_tenant()
            && !self.tenants.contains(&tenant)
        {
            return Err(IngestError::line(
                line,
                format!(
                    "tenant {tenant} is not connected to this customer (connect it with a \
                     `tenant` record before this line, or `posture-api tenants add`)"
                ),
            ));
        }
        if let IngestItem::Identity(identity) = item {
            self.references.remove(&identity.id);
            self.identities.insert(identity.id.clone());
        }
        if let Some(id) = item.identity_reference()
            && !self.identities.contains(id)
        {
            self.references.entry(id.clone()).or_insert(line);
        }
        Ok(())
    }

    /// Identities referenced but not given in this pass, with the first line naming each,
    /// in line order. The store checks that these exist already.
    pub fn unresolved_references(&self) -> Vec<(IdentityId, u64)> {
        let mut refs: Vec<_> = self
            .references
            .iter()
            .map(|(id, l)| (id.clone(), *l))
            .collect();
        refs.sort_by_key(|(_, line)| *line);
        refs
    }
}

#[cfg(test)]
mod tests;
