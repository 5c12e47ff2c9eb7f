//! The identity writes of a pass: the upsert, the role assignments a record gives, and the
//! rows that embed an identity the pass modified.

use diesel::{
    QueryableByName,
    sql_types::{Array, Int4, Nullable, Text, Timestamptz, Uuid as SqlUuid},
};
use diesel_async::RunQueryDsl;
use posture_domain::identity::IdentityUpsert;

use super::{PassError, PassRun};

/// An identity's role assignments as SQL compares them: `[[role, scope, type], ...]`.
fn assignments_json(assignments: &[posture_domain::identity::RoleAssignment]) -> String {
    serde_json::Value::from(
        assignments
            .iter()
            .map(|a| {
                serde_json::Value::from(vec![
                    a.role_name.as_str(),
                    a.scope.as_str(),
                    a.assignment_type.as_str(),
                ])
            })
            .collect::<Vec<_>>(),
    )
    .to_string()
}

impl PassRun<'_> {
    pub(super) async fn flush_identities(&mut self) -> Result<(), PassError> {
        let rows = self.identities.take();
        if rows.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        self.upsert_identities(&rows, &ids).await?;
        // Only the records that give their role assignments replace them.
        let given: Vec<(&str, &[posture_domain::identity::RoleAssignment])> = rows
            .iter()
            .filter_map(|r| Some((r.id.as_str(), r.role_assignments.as_deref()?)))
            .collect();
        if given.is_empty() {
            return Ok(());
        }
        self.mark_reassigned(&given).await?;
        self.replace_assignments(&given).await
    }

    /// Inserts or updates the identities; `modified_at` moves only for one that changed.
    /// Those it moved (new ones too) are noted: a finding embeds its identity, so the
    /// findings of a changed one are modified with it at the end of the pass.
    async fn upsert_identities(
        &mut self,
        rows: &[IdentityUpsert],
        ids: &[&str],
    ) -> Result<(), PassError> {
        #[derive(QueryableByName)]
        struct Upserted {
            #[diesel(sql_type = Text)]
            id: String,
            #[diesel(sql_type = Timestamptz)]
            modified_at: chrono::DateTime<chrono::Utc>,
        }
        let upserted: Vec<Upserted> = diesel::sql_query(
            "INSERT INTO identities (customer_id, id, cloud_tenant_id, kind, display_name, \
                                     principal_name, first_seen_at, last_seen_at, modified_at) \
             SELECT $1, r.id, r.tenant, r.kind, r.display_name, r.principal_name, $2, $2, $8 \
             FROM unnest($3::text[], $4::uuid[], $5::text[], $6::text[], $7::text[]) \
                  AS r(id, tenant, kind, display_name, principal_name) \
             ON CONFLICT (customer_id, id) DO UPDATE SET \
                cloud_tenant_id = EXCLUDED.cloud_tenant_id, kind = EXCLUDED.kind, \
                display_name = EXCLUDED.display_name, principal_name = EXCLUDED.principal_name, \
                last_seen_at = EXCLUDED.last_seen_at, \
                modified_at = CASE WHEN (identities.cloud_tenant_id, identities.kind, \
                                         identities.display_name, identities.principal_name) \
                                        IS DISTINCT FROM \
                                        (EXCLUDED.cloud_tenant_id, EXCLUDED.kind, \
                                         EXCLUDED.display_name, EXCLUDED.principal_name) \
                              THEN EXCLUDED.modified_at ELSE identities.modified_at END \
             RETURNING id, modified_at",
        )
        .bind::<SqlUuid, _>(self.scope.customer_id().as_uuid())
        .bind::<Timestamptz, _>(self.modified_at)
        .bind::<Array<Text>, _>(ids)
        .bind::<Array<SqlUuid>, _>(
            rows.iter()
                .map(|r| r.cloud_tenant_id.as_uuid())
                .collect::<Vec<_>>(),
        )
        .bind::<Array<Text>, _>(rows.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>())
        .bind::<Array<Text>, _>(
            rows.iter()
                .map(|r| r.display_name.as_str())
                .collect::<Vec<_>>(),
        )
        .bind::<Array<Nullable<Text>>, _>(
            rows.iter()
                .map(|r| r.principal_name.as_deref())
                .collect::<Vec<_>>(),
        )
        .bind::<Timestamptz, _>(self.modified_at)
        .load(self.conn)
        .await?;
        // Compared here, not in the RETURNING list: Citus cannot type a parameter there.
        // Without findings or recommendations at the pass's start, none embeds an identity
        // that was there before (a first pass writes its rows with the pass's time).
        if self.had_embedding_rows {
            self.modified_identities.extend(
                upserted
                    .into_iter()
                    .filter(|u| u.modified_at == self.modified_at)
                    .map(|u| u.id),
            );
        }
        Ok(())
    }

    /// The findings and role recommendations of the identities this pass modified
    /// (renamed, another kind, moved to another tenant) are modified with them: each embeds
    /// its identity as the API serves it, so a copy kept by `modifiedSince` (the CLI's, a
    /// consumer's) reads them again.
    pub(super) async fn modify_rows_of_modified_identities(&mut self) -> Result<(), PassError> {
        if self.modified_identities.is_empty() {
            return Ok(());
        }
        let ids = std::mem::take(&mut self.modified_identities);
        for table in ["findings", "role_recommendations"] {
            diesel::sql_query(format!(
                "UPDATE {table} SET modified_at = $2 \
                 WHERE customer_id = $1 AND identity_id = ANY($3) AND modified_at < $2"
            ))
            .bind::<SqlUuid, _>(self.scope.customer_id().as_uuid())
            .bind::<Timestamptz, _>(self.modified_at)
            .bind::<Array<Text>, _>(&ids)
            .execute(self.conn)
            .await?;
        }
        Ok(())
    }

    /// Role assignments are served (the detail route): an identity whose assignments differ
    /// from the stored ones is modified too. Compared before they are replaced.
    async fn mark_reassigned(
        &mut self,
        given: &[(&str, &[posture_domain::identity::RoleAssignment])],
    ) -> Result<(), PassError> {
        diesel::sql_query(
            "UPDATE identities i SET modified_at = $3 \
             FROM unnest($2::text[], $4::text[]) AS r(id, assignments) \
             WHERE i.customer_id = $1 AND i.id = r.id AND i.modified_at <> $3 \
               AND r.assignments::jsonb IS DISTINCT FROM ( \
                   SELECT coalesce(jsonb_agg(jsonb_build_array(a.role_name, a.scope, \
                                                               a.assignment_type) \
                                             ORDER BY a.position), '[]'::jsonb) \
                   FROM role_assignments a \
                   WHERE a.customer_id = $1 AND a.identity_id = r.id)",
        )
        .bind::<SqlUuid, _>(self.scope.customer_id().as_uuid())
        .bind::<Array<Text>, _>(given.iter().map(|(id, _)| *id).collect::<Vec<_>>())
        .bind::<Timestamptz, _>(self.modified_at)
        .bind::<Array<Text>, _>(
            given
                .iter()
                .map(|(_, assignments)| assignments_json(assignments))
                .collect::<Vec<_>>(),
        )
        .execute(self.conn)
        .await?;
        Ok(())
    }

    /// Re-ingesting an identity with its role assignments replaces them.
    async fn replace_assignments(
        &mut self,
        given: &[(&str, &[posture_domain::identity::RoleAssignment])],
    ) -> Result<(), PassError> {
        diesel::sql_query(
            "DELETE FROM role_assignments WHERE customer_id = $1 AND identity_id = ANY($2::text[])",
        )
        .bind::<SqlUuid, _>(self.scope.customer_id().as_uuid())
        .bind::<Array<Text>, _>(given.iter().map(|(id, _)| *id).collect::<Vec<_>>())
        .execute(self.conn)
        .await?;
        let assignments: Vec<(&str, i32, &posture_domain::identity::RoleAssignment)> = given
            .iter()
            .flat_map(|(id, assignments)| {
                assignments
                    .iter()
                    .enumerate()
                    .map(move |(i, a)| (*id, i as i32, a))
            })
            .collect();
        if !assignments.is_empty() {
            diesel::sql_query(
                "INSERT INTO role_assignments (customer_id, identity_id, position, role_name, \
                                               scope, assignment_type) \
                 SELECT $1, r.* FROM unnest($2::text[], $3::int4[], $4::text[], $5::text[], \
                                            $6::text[]) AS r",
            )
            .bind::<SqlUuid, _>(self.scope.customer_id().as_uuid())
            .bind::<Array<Text>, _>(assignments.iter().map(|a| a.0).collect::<Vec<_>>())
            .bind::<Array<Int4>, _>(assignments.iter().map(|a| a.1).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(
                assignments
                    .iter()
                    .map(|a| a.2.role_name.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind::<Array<Text>, _>(
                assignments
                    .iter()
                    .map(|a| a.2.scope.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind::<Array<Text>, _>(
                assignments
                    .iter()
                    .map(|a| a.2.assignment_type.as_str())
                    .collect::<Vec<_>>(),
            )
            .execute(self.conn)
            .await?;
        }
        Ok(())
    }
}
