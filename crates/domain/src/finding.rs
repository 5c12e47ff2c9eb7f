//! Analyzer findings: severities, statuses, types and filters.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{
    error::Error,
    identity::IdentitySummary,
    ids::{CloudTenantId, FindingId, IdentityId},
};

string_enum! {
    /// How bad a finding is. Declaration order is the list order (most severe first).
    pub enum Severity ("severity") {
        Critical = "critical",
        High = "high",
        Medium = "medium",
        Low = "low",
    }
}

string_enum! {
    /// Where a finding stands.
    pub enum FindingStatus ("status") {
        /// Reported by the analyzer and not dealt with.
        Open = "open",
        /// The condition no longer holds.
        Resolved = "resolved",
        /// Accepted as a known exception; not reported again.
        Suppressed = "suppressed",
    }
}

/// Longest finding type.
pub const MAX_FINDING_TYPE_LEN: usize = 64;
/// A finding type as a regular expression (for the contract): lower snake case, starting with
/// a letter, at most [`MAX_FINDING_TYPE_LEN`] characters. [`FindingType`] parses the same rule.
pub const FINDING_TYPE_PATTERN: &str = "^[a-z][a-z0-9_]{0,63}$";

/// What the analyzer found: an open, validated identifier. The types posture knows are in
/// [`FindingType::CATALOGUE`]; an analyzer newer than posture may report others, which are
/// stored, served, filtered and exported like any (so upgrading the analyzer first never
/// stops a customer's updates).
///
/// A type of the catalogue is held as the catalogue's own text: parsing one from borrowed
/// text (`FromStr`, as a row's column is read) does not allocate (a list page reads a
/// hundred).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct FindingType(Cow<'static, str>);

impl Serialize for FindingType {
    /// The type's text, borrowed (`into = "String"` would clone it per value written).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl FindingType {
    /// The types posture knows, with what each means (docs and contract examples).
    pub const CATALOGUE: &[(&str, &str)] = &[
        (
            "tier0_permanent_root",
            "A Tier-0 role (e.g. Global Administrator) assigned permanently at the root scope.",
        ),
        (
            "standing_privileged_access",
            "A privileged role held as standing access where just-in-time activation would do.",
        ),
        (
            "stale_privileged_identity",
            "A privileged identity that has not signed in for 90 days or more.",
        ),
        (
            "mfa_not_enforced",
            "A privileged user whose sign-ins are not protected by multi-factor authentication.",
        ),
        (
            "unused_permissions",
            "Permissions granted but unused over the observation window.",
        ),
        (
            "excessive_api_permissions",
            "An application or service principal holding high-privilege API permissions.",
        ),
        (
            "long_lived_credential",
            "A client secret or certificate valid for more than one year.",
        ),
        (
            "guest_privileged_access",
            "A guest account holding a privileged role.",
        ),
        (
            "orphaned_service_principal",
            "A service principal or application without any owner.",
        ),
        (
            "agent_identity_overprivileged",
            "An agent identity with more privilege than its observed actions need.",
        ),
        (
            "legacy_authentication",
            "Sign-ins through legacy authentication protocols that bypass modern controls.",
        ),
    ];

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether posture's catalogue names this type.
    pub fn is_known(&self) -> bool {
        Self::catalogued(&self.0).is_some()
    }

    /// The catalogue's own text of `text`, when the catalogue names it.
    fn catalogued(text: &str) -> Option<&'static str> {
        Self::CATALOGUE
            .iter()
            .map(|(name, _)| *name)
            .find(|name| *name == text)
    }

    /// The type of `text`: the catalogue's own text when it names it, else `text` (copied
    /// only if borrowed) when well formed.
    fn of(text: Cow<'_, str>) -> Result<Self, Error> {
        if let Some(known) = Self::catalogued(&text) {
            Ok(Self(Cow::Borrowed(known)))
        } else if Self::valid(&text) {
            Ok(Self(Cow::Owned(text.into_owned())))
        } else {
            Err(Error::invalid(
                "findingType",
                format!(
                    "{text:?} is not a finding type (lower snake case, starting with a letter, \
                     at most {MAX_FINDING_TYPE_LEN} characters)"
                ),
            ))
        }
    }

    fn valid(text: &str) -> bool {
        let mut chars = text.chars();
        text.len() <= MAX_FINDING_TYPE_LEN
            && chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    }
}

impl std::fmt::Display for FindingType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for FindingType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Self::of(Cow::Borrowed(s))
    }
}

impl TryFrom<String> for FindingType {
    type Error = Error;

    fn try_from(s: String) -> Result<Self, Error> {
        Self::of(Cow::Owned(s))
    }
}

impl From<FindingType> for String {
    fn from(t: FindingType) -> String {
        t.0.into_owned()
    }
}

string_enum! {
    /// The line formats of the findings export.
    pub enum ExportFormat ("format") {
        /// One JSON finding per line, as the list shows it.
        Ndjson = "ndjson",
        /// One ArcSight CEF line per finding.
        Cef = "cef",
        /// One OCSF 1.5.0 Detection Finding event (JSON) per line.
        Ocsf = "ocsf",
    }
}

/// A finding as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub id: FindingId,
    pub cloud_tenant_id: CloudTenantId,
    pub finding_type: FindingType,
    pub severity: Severity,
    pub status: FindingStatus,
    pub title: String,
    pub description: Option<String>,
    /// The affected identity, when the finding is about one.
    pub identity: Option<IdentitySummary>,
    /// When the analyzer first detected it.
    pub detected_at: DateTime<Utc>,
    /// When an analyzer pass last reported it.
    pub updated_at: DateTime<Utc>,
    /// When anything the API serves of it last changed, by an analyzer pass or a triage (a
    /// re-report with nothing changed leaves it).
    pub modified_at: DateTime<Utc>,
    /// The customer's triage, as it reads now (an expired mark reads as untriaged).
    pub triage: crate::triage::Triage,
}

impl Finding {
    /// The finding's strong entity tag (`ETag`, and what `If-Match` compares): it changes
    /// with everything the API serves of it — a pass's report (`updatedAt`), a change a pass
    /// or a triage made (`modifiedAt`), and a mark's expiry (the triage's `updatedAt`).
    pub fn tag(&self) -> String {
        let micros = |at: DateTime<Utc>| at.timestamp_micros();
        format!(
            "f{:x}.{:x}.{:x}",
            micros(self.updated_at),
            micros(self.modified_at),
            self.triage.updated_at.map_or(0, micros)
        )
    }
}

/// Filters of the finding list and export. Empty lists mean "any"; values within one list
/// are alternatives (OR), different filters combine (AND).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FindingFilter {
    pub tenant: Option<CloudTenantId>,
    pub severities: Vec<Severity>,
    pub statuses: Vec<FindingStatus>,
    pub finding_types: Vec<FindingType>,
    /// Only rows whose `modified_at` is later than this (`modifiedSince`).
    pub modified_since: Option<DateTime<Utc>>,
    /// Only findings whose triage reads as one of these now (`triageState`).
    pub triage_states: Vec<crate::triage::TriageState>,
}

/// A finding to insert or update, from an ingest record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FindingUpsert {
    pub id: FindingId,
    pub cloud_tenant_id: CloudTenantId,
    pub finding_type: FindingType,
    pub severity: Severity,
    pub status: FindingStatus,
    pub title: String,
    pub description: Option<String>,
    pub identity_id: Option<IdentityId>,
    /// When the analyzer detected it; the pass time when not given.
    pub detected_at: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severities_order_most_severe_first() {
        assert!(Severity::Critical < Severity::High);
        assert!(Severity::Medium < Severity::Low);
    }

    #[test]
    fn a_finding_type_is_any_lower_snake_case_identifier() {
        for ok in [
            "tier0_permanent_root",
            "a",
            "oauth_consent_grant_v2",
            &"x".repeat(64),
        ] {
            assert!(ok.parse::<FindingType>().is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Tier0",
            "0day",
            "has-dash",
            "spa ce",
            "é",
            &"x".repeat(65),
        ] {
            assert!(bad.parse::<FindingType>().is_err(), "{bad:?}");
        }
        assert!(
            "mfa_not_enforced"
                .parse::<FindingType>()
                .unwrap()
                .is_known()
        );
        assert!(
            !"oauth_consent_grant"
                .parse::<FindingType>()
                .unwrap()
                .is_known()
        );
    }

    #[test]
    fn a_finding_type_reads_and_writes_as_its_text_catalogued_or_not() {
        for text in ["mfa_not_enforced", "oauth_consent_grant"] {
            let parsed: FindingType = text.parse().unwrap();
            let taken = FindingType::try_from(text.to_owned()).unwrap();
            let read: FindingType = serde_json::from_str(&format!("\"{text}\"")).unwrap();
            assert_eq!(parsed, taken);
            assert_eq!(parsed, read);
            // The catalogue's text is borrowed, whichever way the type was read.
            for t in [&parsed, &taken, &read] {
                assert_eq!(matches!(t.0, Cow::Borrowed(_)), parsed.is_known(), "{text}");
            }
            assert_eq!(parsed.as_str(), text);
            assert_eq!(String::from(parsed.clone()), text);
            assert_eq!(
                serde_json::to_string(&parsed).unwrap(),
                format!("\"{text}\"")
            );
        }
        let refused = serde_json::from_str::<FindingType>("\"Not A Type\"").unwrap_err();
        assert!(
            refused.to_string().contains("not a finding type"),
            "{refused}"
        );
    }

    #[test]
    fn an_unknown_severity_names_the_allowed_values() {
        let err = "urgent".parse::<Severity>().unwrap_err().to_string();
        assert!(err.contains("severity"), "{err}");
        assert!(err.contains("critical, high, medium, low"), "{err}");
    }
}
