//! The ingest format (JSON Lines, one record per line, discriminated by `type`) and the rules
//! of an analyzer pass that need no database.
//!
//! [`parse_line`] turns one line into a validated [`IngestItem`]. [`PassState`] follows a
//! pass line by line: data records must name a tenant connected to the customer (in the
//! database or by an earlier `tenant` record of the same pass); identity references may
//! point forward and are resolved at the end of the pass, reported with the line that made
//! them. Unknown fields are ignored (kept out of the API) and counted in the pass summary;
//! a known field with a bad value rejects the line.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::{
    error::Error,
    finding::FindingUpsert,
    identity::IdentityUpsert,
    ids::{CloudTenantId, IdentityId, PassId},
    recommendation::RecommendationUpsert,
    tenant::NewTenant,
    upr::UprScoreUpsert,
};

mod records;

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
    /// Events recorded for the events feed: new findings, and known findings resolved,
    /// reopened or changed in severity.
    pub events: u64,
    /// Webhook deliveries queued for the events.
    pub deliveries: u64,
    /// Fields posture does not know, over every record (ignored: a newer analyzer's).
    pub unknown_fields: u64,
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
    /// The names of the unknown fields, sorted, at most [`MAX_UNKNOWN_FIELD_NAMES`].
    pub unknown_field_names: Vec<String>,
}

/// The passes of every customer that finished lately, for operators' metrics (the worker
/// exports them: `posture-api ingest` is a one-shot command with nothing to scrape).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RecentPasses {
    /// Passes finished within the window.
    pub count: u64,
    /// Their durations in seconds (0 without passes): the median, the 99th percentile and
    /// the longest.
    pub median_secs: f64,
    pub p99_secs: f64,
    pub longest_secs: f64,
    /// Seconds since the last pass of any customer finished (`None`: there was none).
    pub since_last_secs: Option<f64>,
}

/// Unknown field names a pass summary lists at most.
pub const MAX_UNKNOWN_FIELD_NAMES: usize = 20;

/// A line of a pass, parsed and validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedLine {
    /// The line's number in the input (1-based).
    pub number: u64,
    pub item: IngestItem,
    /// Fields of the record posture does not know (ignored, counted in the pass summary).
    pub unknown_fields: Vec<String>,
}

/// Why a line of a pass is refused.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("line is longer than {MAX_LINE_BYTES} bytes")]
    TooLong,
    /// Not a record of the format: serde_json's description, and the column it stopped at
    /// when it names one.
    #[error("{what}{}", .column.map_or(String::new(), |c| format!(" (column {c})")))]
    NotARecord { what: String, column: Option<usize> },
    /// A record whose values the domain refuses.
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    #[error(transparent)]
    Other(Error),
}

/// Parses and validates one line (numbered 0: the caller numbers it). `Ok(None)` for a
/// blank line.
pub fn parse_line(line: &str) -> Result<Option<ParsedLine>, LineError> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    if line.len() > MAX_LINE_BYTES {
        return Err(LineError::TooLong);
    }
    let record: records::Record = serde_json::from_str(line).map_err(|e| {
        // serde_json counts lines within the text, always 1 here: keep only the column.
        let message = e.to_string();
        match message.rsplit_once(" at line ") {
            Some((what, _)) => LineError::NotARecord {
                what: what.to_owned(),
                column: Some(e.column()),
            },
            None => LineError::NotARecord {
                what: message,
                column: None,
            },
        }
    })?;
    let unknown_fields = record.unknown_fields();
    let item = record.validate().map_err(|e| match e {
        Error::Invalid { field, reason, .. } => LineError::Invalid {
            field: field.to_string(),
            reason: reason.to_string(),
        },
        other => LineError::Other(other),
    })?;
    Ok(Some(ParsedLine {
        number: 0,
        item,
        unknown_fields,
    }))
}

/// Numbers and parses lines (1-based), skipping blank ones: what a pass consumes. `lines`
/// yields each line or the error of reading it.
pub fn numbered_items<E: Into<crate::error::BoxError>>(
    lines: impl Iterator<Item = Result<String, E>>,
) -> impl Iterator<Item = Result<ParsedLine, IngestError>> {
    lines.zip(1u64..).filter_map(|(line, number)| match line {
        Err(e) => Some(Err(IngestError::Input {
            line: number,
            source: e.into(),
        })),
        Ok(text) => match parse_line(&text) {
            Ok(Some(parsed)) => Some(Ok(ParsedLine { number, ..parsed })),
            Ok(None) => None,
            Err(reason) => Some(Err(IngestError::line(number, reason.to_string()))),
        },
    })
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
