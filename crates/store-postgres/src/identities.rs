//! Identities and their role assignments.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::{dsl::sum, prelude::*};
use diesel_async::RunQueryDsl;
use posture_domain::{
    CloudTenantId, CustomerScope, IdentityId, Page, PageRequest, Result,
    identity::{
        Identity, IdentityDetail, IdentityFilter, IdentityKind, IdentitySummary, RoleAssignment,
    },
    ports::IdentityRepository,
};
use uuid::Uuid;

use crate::{
    PgStore,
    error::{corrupt, db_error},
    rendered::RenderOnce,
    schema::{identities, identity_totals, role_assignments},
    sync::{PassBound, keyset_order},
    text::Parsed,
};

#[derive(Queryable, Selectable)]
#[diesel(table_name = identities, check_for_backend(diesel::pg::Pg))]
pub(crate) struct IdentityRow {
    id: String,
    cloud_tenant_id: Uuid,
    kind: String,
    display_name: String,
    principal_name: Option<String>,
    first_seen_at: DateTime<Utc>,
    last_seen_at: DateTime<Utc>,
    modified_at: DateTime<Utc>,
}

impl TryFrom<IdentityRow> for Identity {
    type Error = posture_domain::Error;

    fn try_from(row: IdentityRow) -> Result<Self> {
        Ok(Identity {
            id: row.id.parse().map_err(|e| corrupt("identity id", e))?,
            cloud_tenant_id: CloudTenantId::from_uuid(row.cloud_tenant_id),
            kind: row.kind.parse().map_err(|e| corrupt("identity kind", e))?,
            display_name: row.display_name,
            principal_name: row.principal_name,
            first_seen_at: row.first_seen_at,
            last_seen_at: row.last_seen_at,
            modified_at: row.modified_at,
        })
    }
}

/// The short form of an identity, embedded in findings, recommendations and scores.
#[derive(Queryable, Selectable)]
#[diesel(table_name = identities, check_for_backend(diesel::pg::Pg))]
pub(crate) struct IdentitySummaryRow {
    id: String,
    display_name: String,
    kind: Parsed<IdentityKind>,
    cloud_tenant_id: Uuid,
}

impl TryFrom<IdentitySummaryRow> for IdentitySummary {
    type Error = posture_domain::Error;

    fn try_from(row: IdentitySummaryRow) -> Result<Self> {
        Ok(IdentitySummary {
            id: IdentityId::try_from(row.id).map_err(|e| corrupt("identity id", e))?,
            display_name: row.display_name,
            kind: row.kind.0,
            cloud_tenant_id: CloudTenantId::from_uuid(row.cloud_tenant_id),
        })
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = role_assignments, check_for_backend(diesel::pg::Pg))]
struct RoleAssignmentRow {
    role_name: String,
    scope: String,
    assignment_type: String,
}

impl TryFrom<RoleAssignmentRow> for RoleAssignment {
    type Error = posture_domain::Error;

    fn try_from(row: RoleAssignmentRow) -> Result<Self> {
        Ok(RoleAssignment {
            role_name: row.role_name,
            scope: row.scope,
            assignment_type: row
                .assignment_type
                .parse()
                .map_err(|e| corrupt("assignment type", e))?,
        })
    }
}

#[async_trait]
impl IdentityRepository for PgStore {
    async fn list_identities(
        &self,
        scope: CustomerScope,
        filter: &IdentityFilter,
        page: PageRequest,
    ) -> Result<Page<Identity>> {
        let customer = scope.customer_id().as_uuid();
        let conn = self.conn().await?;
        let conn = &*conn;
        let bound = PassBound::before_query(self, conn, customer, page.order())
            .await
            .map_err(db_error)?;
        let mut rows = identities::table
            .filter(identities::customer_id.eq(customer))
            .into_boxed();
        let mut count = identities::table
            .filter(identities::customer_id.eq(customer))
            .count()
            .into_boxed();
        let mut total = identity_totals::table
            .filter(identity_totals::customer_id.eq(customer))
            .select(sum(identity_totals::total))
            .into_boxed();
        if let Some(tenant) = filter.tenant {
            rows = rows.filter(identities::cloud_tenant_id.eq(tenant.as_uuid()));
            count = count.filter(identities::cloud_tenant_id.eq(tenant.as_uuid()));
            total = total.filter(identity_totals::cloud_tenant_id.eq(tenant.as_uuid()));
        }
        if let Some(since) = filter.modified_since {
            rows = rows.filter(identities::modified_at.gt(since));
            count = count.filter(identities::modified_at.gt(since));
        }
        let key = keyset_order!(
            rows,
            count,
            identities,
            "(identities.modified_at, identities.id)",
            &page,
            bound,
            |i: Identity| i.id.as_str(),
            i.modified_at
        );
        // The total is summed from the per-pass totals unless it counts the rows modified
        // since a time.
        let rows = rows
            .limit(page.fetch())
            .offset(page.offset() as i64)
            .select(IdentityRow::as_select())
            .load::<IdentityRow>(&mut &*conn);
        let total = async {
            if filter.modified_since.is_some() {
                count.get_result::<i64>(&mut &*conn).await
            } else {
                total
                    .get_result::<Option<i64>>(&mut &*conn)
                    .await
                    .map(|t| t.unwrap_or(0))
            }
        };
        bound
            .page(
                (self, conn, customer),
                page,
                rows,
                total,
                Identity::try_from,
                key,
            )
            .await
    }

    async fn get_identity(&self, scope: CustomerScope, id: &IdentityId) -> Result<IdentityDetail> {
        let customer = scope.customer_id().as_uuid();
        let conn = self.conn().await?;
        let identity = identities::table
            .find((customer, id.as_str()))
            .select(IdentityRow::as_select())
            .rendered_once()
            .get_result::<IdentityRow>(&mut &*conn);
        let assignments = role_assignments::table
            .filter(role_assignments::customer_id.eq(customer))
            .filter(role_assignments::identity_id.eq(id.as_str()))
            .order(role_assignments::position)
            .select(RoleAssignmentRow::as_select())
            .rendered_once()
            .load::<RoleAssignmentRow>(&mut &*conn);
        let (identity, assignments) = futures_util::future::try_join(identity, assignments)
            .await
            .map_err(db_error)?;
        Ok(IdentityDetail {
            identity: identity.try_into()?,
            role_assignments: assignments
                .into_iter()
                .map(RoleAssignment::try_from)
                .collect::<Result<_>>()?,
        })
    }
}
