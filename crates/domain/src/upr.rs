//! UPR: a 0-100 risk score per principal (higher is riskier), its rollup and trend.
//!
//! Bands: critical 80-100, high 60-79, medium 40-59, low 0-39. The rollup is computed over
//! the latest score of each principal; the trend gives one rollup per day over the scores
//! recorded that day (days without scores have no point).

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};

use crate::{
    error::{Error, Refusal},
    identity::IdentitySummary,
    ids::{CloudTenantId, IdentityId},
};

/// Highest score.
pub const MAX_SCORE: u8 = 100;
/// Trend length when `days` is not given.
pub const DEFAULT_TREND_DAYS: u32 = 30;
/// Longest trend; larger `days` are clamped to it.
pub const MAX_TREND_DAYS: u32 = 365;
/// Most factors one score may carry.
pub const MAX_FACTORS: usize = 32;

string_enum! {
    /// A score band.
    pub enum UprBand ("band") {
        Critical = "critical",
        High = "high",
        Medium = "medium",
        Low = "low",
    }
}

impl UprBand {
    /// Lowest score of each band.
    pub const CRITICAL_FROM: u8 = 80;
    pub const HIGH_FROM: u8 = 60;
    pub const MEDIUM_FROM: u8 = 40;

    pub fn of(score: u8) -> Self {
        match score {
            s if s >= Self::CRITICAL_FROM => UprBand::Critical,
            s if s >= Self::HIGH_FROM => UprBand::High,
            s if s >= Self::MEDIUM_FROM => UprBand::Medium,
            _ => UprBand::Low,
        }
    }
}

/// Factor name to its contribution (points of the score).
pub type UprFactors = BTreeMap<String, u8>;

/// The latest score of one principal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UprScore {
    pub identity: IdentitySummary,
    pub score: u8,
    pub factors: UprFactors,
    pub recorded_at: DateTime<Utc>,
}

/// Counts of principals per band.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BandCounts {
    pub critical: u64,
    pub high: u64,
    pub medium: u64,
    pub low: u64,
}

impl BandCounts {
    pub fn add(&mut self, score: u8) {
        match UprBand::of(score) {
            UprBand::Critical => self.critical += 1,
            UprBand::High => self.high += 1,
            UprBand::Medium => self.medium += 1,
            UprBand::Low => self.low += 1,
        }
    }
}

/// Principal count, mean score and band counts over a set of scores.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UprSummary {
    pub principal_count: u64,
    /// Mean score, rounded to one decimal; `None` when there are no principals.
    pub mean_score: Option<f64>,
    pub bands: BandCounts,
}

/// The rollup over the latest score of each principal.
#[derive(Clone, Debug, PartialEq)]
pub struct UprRollup {
    pub summary: UprSummary,
    /// The same figures per connected tenant that has scores, by tenant id.
    pub by_tenant: Vec<(CloudTenantId, UprSummary)>,
    /// When the rollup was computed (now: it is computed on request).
    pub computed_at: DateTime<Utc>,
    /// The newest score it includes, if any.
    pub latest_score_at: Option<DateTime<Utc>>,
}

/// One day of the trend: the summary of the scores recorded that day.
#[derive(Clone, Debug, PartialEq)]
pub struct UprTrendPoint {
    pub day: NaiveDate,
    pub summary: UprSummary,
}

/// Filters of the UPR routes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UprFilter {
    pub tenant: Option<CloudTenantId>,
    /// Only principals scoring at least this (principals list only).
    pub min_score: Option<u8>,
}

/// A score to record, from an ingest record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UprScoreUpsert {
    pub identity_id: IdentityId,
    pub cloud_tenant_id: CloudTenantId,
    pub score: u8,
    pub factors: UprFactors,
    /// When the score was computed; the pass time when not given.
    pub recorded_at: Option<DateTime<Utc>>,
}

/// Rounds a mean to one decimal, as the API shows it.
pub fn round_mean(mean: f64) -> f64 {
    (mean * 10.0).round() / 10.0
}

/// `days` for the trend: default 30, clamped to 365, at least 1.
pub fn trend_days(days: Option<u64>) -> Result<u32, Error> {
    match days {
        None => Ok(DEFAULT_TREND_DAYS),
        Some(0) => Err(Error::refused(
            Refusal::OutOfRange,
            "days",
            "must be 1 or more",
        )),
        Some(n) => Ok(n.min(u64::from(MAX_TREND_DAYS)) as u32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_have_documented_bounds() {
        assert_eq!(UprBand::of(100), UprBand::Critical);
        assert_eq!(UprBand::of(80), UprBand::Critical);
        assert_eq!(UprBand::of(79), UprBand::High);
        assert_eq!(UprBand::of(60), UprBand::High);
        assert_eq!(UprBand::of(59), UprBand::Medium);
        assert_eq!(UprBand::of(40), UprBand::Medium);
        assert_eq!(UprBand::of(39), UprBand::Low);
        assert_eq!(UprBand::of(0), UprBand::Low);
    }

    #[test]
    fn trend_days_default_and_clamp() {
        assert_eq!(trend_days(None).unwrap(), 30);
        assert_eq!(trend_days(Some(1000)).unwrap(), 365);
        assert!(trend_days(Some(0)).is_err());
    }
}
