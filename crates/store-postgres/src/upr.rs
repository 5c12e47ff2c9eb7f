//! UPR: the rollup over each principal's latest score, the principals list and the trend.
//!
//! Band bounds come from the domain (`UprBand`) as query parameters, so SQL and the
//! documented bands cannot drift apart. Means are computed from exact sums.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use diesel::{
    QueryableByName,
    prelude::*,
    sql_types::{BigInt, Date, Int2, Int4, Nullable, Timestamptz, Uuid as SqlUuid},
};
use diesel_async::RunQueryDsl;
use posture_domain::{
    CloudTenantId, CustomerScope, Page, PageRequest, Result,
    identity::IdentitySummary,
    page::{KeyPart, KeyReader, SortKey},
    ports::UprRepository,
    upr::{
        BandCounts, UprBand, UprFilter, UprRollup, UprScore, UprSummary, UprTrendPoint, round_mean,
    },
};
use uuid::Uuid;

use crate::{
    PgStore,
    error::{corrupt, db_error},
    identities::IdentitySummaryRow,
    schema::{identities, upr_latest},
    sync::after_key,
};

/// Aggregate columns shared by the rollup and the trend (with the band bounds as $2..$4).
const AGGREGATES: &str = "count(*) AS principal_count, sum(score)::int8 AS score_sum, \
     count(*) FILTER (WHERE score >= $2) AS critical, \
     count(*) FILTER (WHERE score >= $3 AND score < $2) AS high, \
     count(*) FILTER (WHERE score >= $4 AND score < $3) AS medium, \
     count(*) FILTER (WHERE score < $4) AS low";

#[derive(QueryableByName)]
struct Aggregate {
    #[diesel(sql_type = BigInt)]
    principal_count: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    score_sum: Option<i64>,
    #[diesel(sql_type = BigInt)]
    critical: i64,
    #[diesel(sql_type = BigInt)]
    high: i64,
    #[diesel(sql_type = BigInt)]
    medium: i64,
    #[diesel(sql_type = BigInt)]
    low: i64,
}

impl Aggregate {
    fn summary(&self) -> UprSummary {
        let count = self.principal_count.max(0) as u64;
        UprSummary {
            principal_count: count,
            mean_score: (count > 0)
                .then(|| round_mean(self.score_sum.unwrap_or(0) as f64 / count as f64)),
            bands: BandCounts {
                critical: self.critical as u64,
                high: self.high as u64,
                medium: self.medium as u64,
                low: self.low as u64,
            },
        }
    }
}

#[derive(QueryableByName)]
struct TenantAggregate {
    #[diesel(sql_type = SqlUuid)]
    cloud_tenant_id: Uuid,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    latest: Option<DateTime<Utc>>,
    #[diesel(embed)]
    aggregate: Aggregate,
}

#[derive(QueryableByName)]
struct DayAggregate {
    #[diesel(sql_type = Date)]
    day: NaiveDate,
    #[diesel(embed)]
    aggregate: Aggregate,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = upr_latest, check_for_backend(diesel::pg::Pg))]
struct LatestRow {
    score: i16,
    factors: serde_json::Value,
    recorded_at: DateTime<Utc>,
}

fn to_score((row, identity): (LatestRow, IdentitySummaryRow)) -> Result<UprScore> {
    let factors: BTreeMap<String, u8> =
        serde_json::from_value(row.factors).map_err(|e| corrupt("UPR factors", e))?;
    Ok(UprScore {
        identity: IdentitySummary::try_from(identity)?,
        score: u8::try_from(row.score).map_err(|e| corrupt("UPR score", e))?,
        factors,
        recorded_at: row.recorded_at,
    })
}

fn bands() -> (i16, i16, i16) {
    (
        i16::from(UprBand::CRITICAL_FROM),
        i16::from(UprBand::HIGH_FROM),
        i16::from(UprBand::MEDIUM_FROM),
    )
}

#[async_trait]
impl UprRepository for PgStore {
    async fn upr_rollup(
        &self,
        scope: CustomerScope,
        tenant: Option<CloudTenantId>,
    ) -> Result<UprRollup> {
        let (critical, high, medium) = bands();
        let mut conn = self.conn().await?;
        let groups: Vec<TenantAggregate> = diesel::sql_query(format!(
            "SELECT cloud_tenant_id, max(recorded_at) AS latest, {AGGREGATES} FROM upr_latest \
             WHERE customer_id = $1 AND ($5::uuid IS NULL OR cloud_tenant_id = $5) \
             GROUP BY cloud_tenant_id ORDER BY cloud_tenant_id"
        ))
        .bind::<SqlUuid, _>(scope.customer_id().as_uuid())
        .bind::<Int2, _>(critical)
        .bind::<Int2, _>(high)
        .bind::<Int2, _>(medium)
        .bind::<Nullable<SqlUuid>, _>(tenant.map(|t| t.as_uuid()))
        .load(&mut conn)
        .await
        .map_err(db_error)?;
        let total = Aggregate {
            principal_count: groups.iter().map(|g| g.aggregate.principal_count).sum(),
            score_sum: Some(groups.iter().filter_map(|g| g.aggregate.score_sum).sum()),
            critical: groups.iter().map(|g| g.aggregate.critical).sum(),
            high: groups.iter().map(|g| g.aggregate.high).sum(),
            medium: groups.iter().map(|g| g.aggregate.medium).sum(),
            low: groups.iter().map(|g| g.aggregate.low).sum(),
        };
        Ok(UprRollup {
            summary: total.summary(),
            latest_score_at: groups.iter().filter_map(|g| g.latest).max(),
            by_tenant: groups
                .iter()
                .map(|g| {
                    (
                        CloudTenantId::from_uuid(g.cloud_tenant_id),
                        g.aggregate.summary(),
                    )
                })
                .collect(),
            computed_at: self.clock.now(),
        })
    }

    async fn list_upr_principals(
        &self,
        scope: CustomerScope,
        filter: &UprFilter,
        page: PageRequest,
    ) -> Result<Page<UprScore>> {
        let customer = scope.customer_id().as_uuid();
        let mut rows = upr_latest::table
            .inner_join(
                identities::table.on(identities::customer_id
                    .eq(upr_latest::customer_id)
                    .and(identities::id.eq(upr_latest::identity_id))),
            )
            .filter(upr_latest::customer_id.eq(customer))
            .into_boxed();
        let mut total = upr_latest::table
            .filter(upr_latest::customer_id.eq(customer))
            .count()
            .into_boxed();
        if let Some(tenant) = filter.tenant {
            rows = rows.filter(upr_latest::cloud_tenant_id.eq(tenant.as_uuid()));
            total = total.filter(upr_latest::cloud_tenant_id.eq(tenant.as_uuid()));
        }
        if let Some(min) = filter.min_score {
            rows = rows.filter(upr_latest::score.ge(i16::from(min)));
            total = total.filter(upr_latest::score.ge(i16::from(min)));
        }
        // After a key: lower scores, or the same score and a later id (the rank index is
        // entered at the key's score; only principals of that one score are stepped over).
        if let Some((score, id)) = after_key(&page, read_score_key)? {
            rows = rows.filter(upr_latest::score.le(score)).filter(
                upr_latest::score
                    .lt(score)
                    .or(upr_latest::identity_id.gt(id)),
            );
        }
        let conn = self.conn().await?;
        let rows = rows
            .order((upr_latest::score.desc(), upr_latest::identity_id))
            .limit(page.fetch())
            .offset(page.offset() as i64)
            .select((LatestRow::as_select(), IdentitySummaryRow::as_select()))
            .load::<(LatestRow, IdentitySummaryRow)>(&mut &*conn);
        let total = total.get_result::<i64>(&mut &*conn);
        let (rows, total) = futures_util::future::try_join(rows, total)
            .await
            .map_err(db_error)?;
        let items = rows.into_iter().map(to_score).collect::<Result<Vec<_>>>()?;
        Ok(page.page_of(items, total.max(0) as u64, |s: &UprScore| {
            SortKey(vec![
                KeyPart::Int(i64::from(s.score)),
                KeyPart::Text(s.identity.id.as_str().to_owned()),
            ])
        }))
    }

    async fn upr_trend(
        &self,
        scope: CustomerScope,
        tenant: Option<CloudTenantId>,
        days: u32,
    ) -> Result<Vec<UprTrendPoint>> {
        let (critical, high, medium) = bands();
        let mut conn = self.conn().await?;
        let rows: Vec<DayAggregate> = diesel::sql_query(format!(
            "SELECT day, {AGGREGATES} FROM upr_scores \
             WHERE customer_id = $1 AND day > (now() AT TIME ZONE 'UTC')::date - $6 \
               AND ($5::uuid IS NULL OR cloud_tenant_id = $5) \
             GROUP BY day ORDER BY day"
        ))
        .bind::<SqlUuid, _>(scope.customer_id().as_uuid())
        .bind::<Int2, _>(critical)
        .bind::<Int2, _>(high)
        .bind::<Int2, _>(medium)
        .bind::<Nullable<SqlUuid>, _>(tenant.map(|t| t.as_uuid()))
        .bind::<Int4, _>(i32::try_from(days).unwrap_or(i32::MAX))
        .load(&mut conn)
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(|r| UprTrendPoint {
                day: r.day,
                summary: r.aggregate.summary(),
            })
            .collect())
    }
}

/// The key of a principal in the rank order: (score, identity id).
fn read_score_key(key: &SortKey) -> Result<(i16, String)> {
    let mut reader = KeyReader::new(key);
    let score = i16::try_from(reader.int()?).map_err(|_| SortKey::mismatch())?;
    let id = reader.text()?.to_owned();
    reader.end()?;
    Ok((score, id))
}
