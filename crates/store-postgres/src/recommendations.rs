//! Right-sized role recommendations with their target identity.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use posture_domain::{
    CloudTenantId, CustomerScope, Page, PageRequest, Result,
    identity::IdentitySummary,
    ports::RecommendationRepository,
    recommendation::{RecommendationFilter, RecommendedRole, RoleRecommendation},
};
use uuid::Uuid;

use crate::{
    PgStore,
    error::{corrupt, db_error},
    identities::IdentitySummaryRow,
    schema::{identities, role_recommendations},
    sync::{PassBound, keyset_order},
};

#[derive(Queryable, Selectable)]
#[diesel(table_name = role_recommendations, check_for_backend(diesel::pg::Pg))]
struct RecommendationRow {
    id: String,
    cloud_tenant_id: Uuid,
    current_roles: Vec<String>,
    recommended_role_name: String,
    recommended_actions: Vec<String>,
    removed_actions: Vec<String>,
    updated_at: DateTime<Utc>,
    modified_at: DateTime<Utc>,
}

fn to_recommendation(
    (row, identity): (RecommendationRow, IdentitySummaryRow),
) -> Result<RoleRecommendation> {
    Ok(RoleRecommendation {
        id: row
            .id
            .parse()
            .map_err(|e| corrupt("recommendation id", e))?,
        cloud_tenant_id: CloudTenantId::from_uuid(row.cloud_tenant_id),
        identity: IdentitySummary::try_from(identity)?,
        current_roles: row.current_roles,
        recommended_role: RecommendedRole {
            name: row.recommended_role_name,
            actions: row.recommended_actions,
        },
        removed_actions: row.removed_actions,
        updated_at: row.updated_at,
        modified_at: row.modified_at,
    })
}

#[async_trait]
impl RecommendationRepository for PgStore {
    async fn list_recommendations(
        &self,
        scope: CustomerScope,
        filter: &RecommendationFilter,
        page: PageRequest,
    ) -> Result<Page<RoleRecommendation>> {
        let customer = scope.customer_id().as_uuid();
        let conn = self.conn().await?;
        let conn = &*conn;
        let bound = PassBound::before_query(self, conn, customer, page.order())
            .await
            .map_err(db_error)?;
        let mut rows = role_recommendations::table
            .inner_join(
                identities::table.on(identities::customer_id
                    .eq(role_recommendations::customer_id)
                    .and(identities::id.eq(role_recommendations::identity_id))),
            )
            .filter(role_recommendations::customer_id.eq(customer))
            .into_boxed();
        let mut total = role_recommendations::table
            .filter(role_recommendations::customer_id.eq(customer))
            .count()
            .into_boxed();
        if let Some(tenant) = filter.tenant {
            rows = rows.filter(role_recommendations::cloud_tenant_id.eq(tenant.as_uuid()));
            total = total.filter(role_recommendations::cloud_tenant_id.eq(tenant.as_uuid()));
        }
        if let Some(since) = filter.modified_since {
            rows = rows.filter(role_recommendations::modified_at.gt(since));
            total = total.filter(role_recommendations::modified_at.gt(since));
        }
        let key = keyset_order!(
            rows,
            total,
            role_recommendations,
            "(role_recommendations.modified_at, role_recommendations.id)",
            &page,
            bound,
            |r: RoleRecommendation| r.id.as_str(),
            r.modified_at
        );
        let rows = rows
            .limit(page.fetch())
            .offset(page.offset() as i64)
            .select((
                RecommendationRow::as_select(),
                IdentitySummaryRow::as_select(),
            ))
            .load::<(RecommendationRow, IdentitySummaryRow)>(&mut &*conn);
        let total = total.get_result::<i64>(&mut &*conn);
        bound
            .page(
                (self, conn, customer),
                page,
                rows,
                total,
                to_recommendation,
                key,
            )
            .await
    }
}
