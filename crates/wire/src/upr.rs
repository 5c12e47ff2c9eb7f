//! UPR: per-principal risk scores (0-100, higher is riskier), the rollup and the trend.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use posture_domain::{
    CloudTenantId, Error,
    upr::{
        BandCounts, MAX_SCORE, UprBand, UprRollup, UprScore, UprSummary, UprTrendPoint, trend_days,
    },
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    identities::IdentitySummaryResponse,
    query::{Integer, Score, TrendDays},
};

/// The filter of `GET /upr/principals`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UprPrincipalsQuery {
    /// Only principals scoring at least this (0 to 100).
    pub min_score: Option<Score>,
}

impl UprPrincipalsQuery {
    pub fn min_score(&self) -> Option<u8> {
        // The rule bounds the value to 0..=100.
        self.min_score
            .map(|s| u8::try_from(s.get()).unwrap_or(MAX_SCORE))
    }
}

/// The length of `GET /upr/trend`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct TrendQuery {
    /// Days covered, today included: default 30; above 365 it is clamped to 365.
    pub days: Option<TrendDays>,
}

impl TrendQuery {
    /// The days covered (default filled in, clamped).
    pub fn days(&self) -> Result<u32, Error> {
        trend_days(self.days.map(Integer::get))
    }
}

/// Principals per band: critical 80-100, high 60-79, medium 40-59, low 0-39.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BandCountsResponse {
    pub critical: u64,
    pub high: u64,
    pub medium: u64,
    pub low: u64,
}

impl From<BandCounts> for BandCountsResponse {
    fn from(b: BandCounts) -> Self {
        Self {
            critical: b.critical,
            high: b.high,
            medium: b.medium,
            low: b.low,
        }
    }
}

/// Figures over a set of principals.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UprSummaryResponse {
    pub principal_count: u64,
    /// Mean score, one decimal; `null` when there are no principals.
    pub mean_score: Option<f64>,
    pub bands: BandCountsResponse,
}

impl From<UprSummary> for UprSummaryResponse {
    fn from(s: UprSummary) -> Self {
        Self {
            principal_count: s.principal_count,
            mean_score: s.mean_score,
            bands: s.bands.into(),
        }
    }
}

/// The rollup of one tenant.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UprTenantRollupResponse {
    #[schemars(schema_with = "crate::tenant_id")]
    pub cloud_tenant_id: CloudTenantId,
    #[serde(flatten)]
    pub summary: UprSummaryResponse,
}

/// The rollup over the latest score of each principal (`GET /upr`).
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UprRollupResponse {
    /// The tenant the rollup is restricted to; `null` for all the customer's tenants.
    #[schemars(schema_with = "crate::nullable_tenant_id")]
    pub cloud_tenant_id: Option<String>,
    #[serde(flatten)]
    pub summary: UprSummaryResponse,
    /// The same figures per tenant with scores.
    pub by_tenant: Vec<UprTenantRollupResponse>,
    /// When this rollup was computed (it is computed on request).
    #[serde(serialize_with = "crate::time::serialize")]
    pub computed_at: DateTime<Utc>,
    /// The newest score included; `null` when there are none.
    #[serde(serialize_with = "crate::time::option::serialize")]
    pub latest_score_at: Option<DateTime<Utc>>,
}

impl UprRollupResponse {
    pub fn new(rollup: UprRollup, tenant: Option<String>) -> Self {
        Self {
            cloud_tenant_id: tenant,
            summary: rollup.summary.into(),
            by_tenant: rollup
                .by_tenant
                .into_iter()
                .map(|(id, s)| UprTenantRollupResponse {
                    cloud_tenant_id: id,
                    summary: s.into(),
                })
                .collect(),
            computed_at: rollup.computed_at,
            latest_score_at: rollup.latest_score_at,
        }
    }
}

/// The latest score of one principal (`GET /upr/principals`).
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UprPrincipalResponse {
    pub identity: IdentitySummaryResponse,
    #[schemars(schema_with = "crate::tenant_id")]
    pub cloud_tenant_id: CloudTenantId,
    /// 0 to 100; higher is riskier.
    pub score: u8,
    #[schemars(schema_with = "crate::closed_set::<UprBand>")]
    pub band: UprBand,
    /// Each factor's contribution, in points of the score.
    pub factors: BTreeMap<String, u8>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub recorded_at: DateTime<Utc>,
}

impl From<UprScore> for UprPrincipalResponse {
    fn from(s: UprScore) -> Self {
        Self {
            cloud_tenant_id: s.identity.cloud_tenant_id,
            identity: s.identity.into(),
            score: s.score,
            band: UprBand::of(s.score),
            factors: s.factors,
            recorded_at: s.recorded_at,
        }
    }
}

/// One day of the trend: the figures over the scores recorded that day.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UprTrendPointResponse {
    pub day: NaiveDate,
    #[serde(flatten)]
    pub summary: UprSummaryResponse,
}

impl From<UprTrendPoint> for UprTrendPointResponse {
    fn from(p: UprTrendPoint) -> Self {
        Self {
            day: p.day,
            summary: p.summary.into(),
        }
    }
}

/// Facts of a trend response.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UprTrendMeta {
    /// Days covered (after clamping to 365), today included.
    pub days: u32,
    /// First day covered.
    pub from: NaiveDate,
    /// Last day covered (today, UTC).
    pub to: NaiveDate,
    /// The tenant filter, resolved; omitted when no `tenant` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::tenant_id")]
    pub tenant: Option<String>,
}

/// The trend (`GET /upr/trend`): one point per day that has scores, oldest first.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UprTrendResponse {
    pub data: Vec<UprTrendPointResponse>,
    pub meta: UprTrendMeta,
}
