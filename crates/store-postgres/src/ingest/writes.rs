//! The batch writes of a pass: one `INSERT ... SELECT FROM unnest(...)` per batch and kind.
//!
//! Arrays travel in PostgreSQL's binary format, so a batch of thousands of rows is one round
//! trip with a fixed number of parameters. Lists inside a row (roles, actions) travel as JSON
//! text and become `text[]` in SQL.

use std::collections::HashSet;

use diesel::{
    QueryableByName,
    sql_types::{Array, Int2, Nullable, Text, Timestamptz, Uuid as SqlUuid},
};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use posture_domain::CustomerScope;

use super::{PassError, PassRun};

/// `text[]` from a JSON array held in a text column `col` of the unnest row.
macro_rules! json_text_array {
    ($col:literal) => {
        concat!(
            "ARRAY(SELECT e FROM jsonb_array_elements_text(r.",
            $col,
            "::jsonb) WITH ORDINALITY AS x(e, n) ORDER BY n)"
        )
    };
}

/// One column of a batch, as an array to bind (`unnest($n::text[])`).
fn column<'a, R, T>(rows: &'a [R], value: impl Fn(&'a R) -> T) -> Vec<T> {
    rows.iter().map(value).collect()
}

fn json_list(items: &[String]) -> String {
    serde_json::Value::from(items).to_string()
}

/// The upsert of a batch of findings. `detected_at` keeps the earliest detection known;
/// `first_pass_id` is never updated; `modified_at` moves only when a served column changes.
const UPSERT_FINDINGS: &str = "INSERT INTO findings (customer_id, id, cloud_tenant_id, finding_type, severity, \
                                   status, title, description, identity_id, detected_at, \
                                   updated_at, first_pass_id, last_pass_id, modified_at) \
             SELECT $1, r.id, r.tenant, r.finding_type, r.severity, r.status, r.title, \
                    r.description, r.identity_id, COALESCE(r.detected_at, $2), $2, $3, $3, \
                    $13 \
             FROM unnest($4::text[], $5::uuid[], $6::text[], $7::text[], $8::text[], \
                         $9::text[], $10::text[], $11::text[], $12::timestamptz[]) \
                  AS r(id, tenant, finding_type, severity, status, title, description, \
                       identity_id, detected_at) \
             ON CONFLICT (customer_id, id) DO UPDATE SET \
                cloud_tenant_id = EXCLUDED.cloud_tenant_id, \
                finding_type = EXCLUDED.finding_type, severity = EXCLUDED.severity, \
                status = EXCLUDED.status, title = EXCLUDED.title, \
                description = EXCLUDED.description, identity_id = EXCLUDED.identity_id, \
                detected_at = LEAST(findings.detected_at, EXCLUDED.detected_at), \
                updated_at = EXCLUDED.updated_at, last_pass_id = EXCLUDED.last_pass_id, \
                modified_at = CASE WHEN (findings.cloud_tenant_id, findings.finding_type, \
                                         findings.severity, findings.status, findings.title, \
                                         findings.description, findings.identity_id, \
                                         findings.detected_at) \
                                        IS DISTINCT FROM \
                                        (EXCLUDED.cloud_tenant_id, EXCLUDED.finding_type, \
                                         EXCLUDED.severity, EXCLUDED.status, EXCLUDED.title, \
                                         EXCLUDED.description, EXCLUDED.identity_id, \
                                         LEAST(findings.detected_at, EXCLUDED.detected_at)) \
                              THEN EXCLUDED.modified_at ELSE findings.modified_at END";

impl PassRun<'_> {
    pub(super) async fn flush_findings(&mut self) -> Result<(), PassError> {
        let rows = self.findings.take();
        if rows.is_empty() {
            return Ok(());
        }
        // What the pass changes of known findings (its lifecycle events), read before the
        // upsert (the pass holds the customer's lock: nothing else writes them meanwhile).
        // One index probe per row; the upsert itself stays the plain statement (wrapping it in
        // a CTE that returns its rows made each batch three times slower).
        self.note_finding_changes(&rows).await?;
        // `detected_at` keeps the earliest detection known; `first_pass_id` is never updated.
        let upsert = UPSERT_FINDINGS;
        diesel::sql_query(upsert)
            .bind::<SqlUuid, _>(self.scope.customer_id().as_uuid())
            .bind::<Timestamptz, _>(self.modified_at)
            .bind::<SqlUuid, _>(self.pass_id.as_uuid())
            .bind::<Array<Text>, _>(column(&rows, |r| r.id.as_str()))
            .bind::<Array<SqlUuid>, _>(column(&rows, |r| r.cloud_tenant_id.as_uuid()))
            .bind::<Array<Text>, _>(column(&rows, |r| r.finding_type.as_str()))
            .bind::<Array<Text>, _>(column(&rows, |r| r.severity.as_str()))
            .bind::<Array<Text>, _>(column(&rows, |r| r.status.as_str()))
            .bind::<Array<Text>, _>(column(&rows, |r| r.title.as_str()))
            .bind::<Array<Nullable<Text>>, _>(column(&rows, |r| r.description.as_deref()))
            .bind::<Array<Nullable<Text>>, _>(column(&rows, |r| {
                r.identity_id.as_ref().map(|i| i.as_str())
            }))
            .bind::<Array<Nullable<Timestamptz>>, _>(column(&rows, |r| r.detected_at))
            .bind::<Timestamptz, _>(self.modified_at)
            .execute(self.conn)
            .await?;
        Ok(())
    }

    pub(super) async fn flush_recommendations(&mut self) -> Result<(), PassError> {
        let rows = self.recommendations.take();
        if rows.is_empty() {
            return Ok(());
        }
        diesel::sql_query(concat!(
            "INSERT INTO role_recommendations (customer_id, id, cloud_tenant_id, identity_id, \
                current_roles, recommended_role_name, recommended_actions, removed_actions, \
                created_at, updated_at, modified_at) \
             SELECT $1, r.id, r.tenant, r.identity_id, ",
            json_text_array!("current_roles"),
            ", r.role_name, ",
            json_text_array!("actions"),
            ", ",
            json_text_array!("removed"),
            ", $2, $2, $10 \
             FROM unnest($3::text[], $4::uuid[], $5::text[], $6::text[], $7::text[], \
                         $8::text[], $9::text[]) \
                  AS r(id, tenant, identity_id, current_roles, role_name, actions, removed) \
             ON CONFLICT (customer_id, id) DO UPDATE SET \
                cloud_tenant_id = EXCLUDED.cloud_tenant_id, identity_id = EXCLUDED.identity_id, \
                current_roles = EXCLUDED.current_roles, \
                recommended_role_name = EXCLUDED.recommended_role_name, \
                recommended_actions = EXCLUDED.recommended_actions, \
                removed_actions = EXCLUDED.removed_actions, updated_at = EXCLUDED.updated_at, \
                modified_at = CASE WHEN (role_recommendations.cloud_tenant_id, \
                                         role_recommendations.identity_id, \
                                         role_recommendations.current_roles, \
                                         role_recommendations.recommended_role_name, \
                                         role_recommendations.recommended_actions, \
                                         role_recommendations.removed_actions) \
                                        IS DISTINCT FROM \
                                        (EXCLUDED.cloud_tenant_id, EXCLUDED.identity_id, \
                                         EXCLUDED.current_roles, \
                                         EXCLUDED.recommended_role_name, \
                                         EXCLUDED.recommended_actions, \
                                         EXCLUDED.removed_actions) \
                              THEN EXCLUDED.modified_at \
                              ELSE role_recommendations.modified_at END"
        ))
        .bind::<SqlUuid, _>(self.scope.customer_id().as_uuid())
        .bind::<Timestamptz, _>(self.modified_at)
        .bind::<Array<Text>, _>(column(&rows, |r| r.id.as_str()))
        .bind::<Array<SqlUuid>, _>(column(&rows, |r| r.cloud_tenant_id.as_uuid()))
        .bind::<Array<Text>, _>(column(&rows, |r| r.identity_id.as_str()))
        .bind::<Array<Text>, _>(column(&rows, |r| json_list(&r.current_roles)))
        .bind::<Array<Text>, _>(column(&rows, |r| r.recommended_role.name.as_str()))
        .bind::<Array<Text>, _>(column(&rows, |r| json_list(&r.recommended_role.actions)))
        .bind::<Array<Text>, _>(column(&rows, |r| json_list(&r.removed_actions)))
        .bind::<Timestamptz, _>(self.modified_at)
        .execute(self.conn)
        .await?;
        Ok(())
    }

    pub(super) async fn flush_upr_scores(&mut self) -> Result<(), PassError> {
        let rows = self.upr_scores.take();
        if rows.is_empty() {
            return Ok(());
        }
        let recorded =
            |r: &posture_domain::upr::UprScoreUpsert| r.recorded_at.unwrap_or(self.modified_at);
        // One statement: the day's history row and the principal's latest score. A score
        // recorded earlier than the stored one never replaces it.
        diesel::sql_query(
            "WITH r AS (SELECT * FROM unnest($3::text[], $4::uuid[], $5::int2[], $6::text[], \
                                             $7::timestamptz[]) \
                        AS r(identity_id, tenant, score, factors, recorded_at)), \
             history AS ( \
                INSERT INTO upr_scores (customer_id, identity_id, day, cloud_tenant_id, score, \
                                        factors, recorded_at, pass_id) \
                SELECT $1, r.identity_id, (r.recorded_at AT TIME ZONE 'UTC')::date, r.tenant, \
                       r.score, r.factors::jsonb, r.recorded_at, $2 FROM r \
                ON CONFLICT (customer_id, identity_id, day) DO UPDATE SET \
                   cloud_tenant_id = EXCLUDED.cloud_tenant_id, score = EXCLUDED.score, \
                   factors = EXCLUDED.factors, recorded_at = EXCLUDED.recorded_at, \
                   pass_id = EXCLUDED.pass_id \
                WHERE upr_scores.recorded_at <= EXCLUDED.recorded_at) \
             INSERT INTO upr_latest (customer_id, identity_id, cloud_tenant_id, score, factors, \
                                     recorded_at) \
             SELECT DISTINCT ON (r.identity_id) $1, r.identity_id, r.tenant, r.score, \
                    r.factors::jsonb, r.recorded_at \
             FROM r ORDER BY r.identity_id, r.recorded_at DESC \
             ON CONFLICT (customer_id, identity_id) DO UPDATE SET \
                cloud_tenant_id = EXCLUDED.cloud_tenant_id, score = EXCLUDED.score, \
                factors = EXCLUDED.factors, recorded_at = EXCLUDED.recorded_at \
             WHERE upr_latest.recorded_at <= EXCLUDED.recorded_at",
        )
        .bind::<SqlUuid, _>(self.scope.customer_id().as_uuid())
        .bind::<SqlUuid, _>(self.pass_id.as_uuid())
        .bind::<Array<Text>, _>(column(&rows, |r| r.identity_id.as_str()))
        .bind::<Array<SqlUuid>, _>(column(&rows, |r| r.cloud_tenant_id.as_uuid()))
        .bind::<Array<Int2>, _>(column(&rows, |r| i16::from(r.score)))
        .bind::<Array<Text>, _>(column(&rows, |r| {
            serde_json::to_string(&r.factors).unwrap_or_else(|_| "{}".to_owned())
        }))
        .bind::<Array<Timestamptz>, _>(column(&rows, recorded))
        .execute(self.conn)
        .await?;
        Ok(())
    }
}

#[derive(QueryableByName)]
struct MissingId {
    #[diesel(sql_type = Text)]
    id: String,
}

/// Which of `ids` are not identities of the customer.
pub(super) async fn missing_identities(
    conn: &mut AsyncPgConnection,
    scope: CustomerScope,
    ids: &[&str],
) -> Result<HashSet<String>, PassError> {
    let missing: Vec<MissingId> = diesel::sql_query(
        "SELECT r.id FROM unnest($2::text[]) AS r(id) \
         WHERE NOT EXISTS (SELECT 1 FROM identities i WHERE i.customer_id = $1 AND i.id = r.id)",
    )
    .bind::<SqlUuid, _>(scope.customer_id().as_uuid())
    .bind::<Array<Text>, _>(ids)
    .load(conn)
    .await?;
    Ok(missing.into_iter().map(|m| m.id).collect())
}

pub(super) async fn recompute_finding_totals(
    conn: &mut AsyncPgConnection,
    scope: CustomerScope,
) -> Result<(), PassError> {
    let customer = scope.customer_id().as_uuid();
    diesel::sql_query("DELETE FROM finding_totals WHERE customer_id = $1")
        .bind::<SqlUuid, _>(customer)
        .execute(conn)
        .await?;
    diesel::sql_query(
        "INSERT INTO finding_totals (customer_id, cloud_tenant_id, severity, status, \
                                     finding_type, total) \
         SELECT customer_id, cloud_tenant_id, severity, status, finding_type, count(*) \
         FROM findings WHERE customer_id = $1 GROUP BY 1, 2, 3, 4, 5",
    )
    .bind::<SqlUuid, _>(customer)
    .execute(conn)
    .await?;
    Ok(())
}

pub(super) async fn recompute_identity_totals(
    conn: &mut AsyncPgConnection,
    scope: CustomerScope,
) -> Result<(), PassError> {
    let customer = scope.customer_id().as_uuid();
    diesel::sql_query("DELETE FROM identity_totals WHERE customer_id = $1")
        .bind::<SqlUuid, _>(customer)
        .execute(conn)
        .await?;
    diesel::sql_query(
        "INSERT INTO identity_totals (customer_id, cloud_tenant_id, total) \
         SELECT customer_id, cloud_tenant_id, count(*) FROM identities \
         WHERE customer_id = $1 GROUP BY 1, 2",
    )
    .bind::<SqlUuid, _>(customer)
    .execute(conn)
    .await?;
    Ok(())
}
