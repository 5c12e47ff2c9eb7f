//! What a pass changes of the findings the customer already had: the source of its
//! lifecycle events (`finding_resolved`, `finding_reopened`, `finding_severity_changed`).

use diesel::{
    prelude::*,
    sql_types::{Array, Text, Uuid as SqlUuid},
};
use diesel_async::RunQueryDsl;
use posture_domain::finding::FindingUpsert;

use super::{PassError, PassRun};

impl PassRun<'_> {
    /// Notes in `pass_finding_changes` each finding of `rows` whose status or severity the
    /// upsert is about to change (the first `from` of the pass is kept).
    pub(super) async fn note_finding_changes(
        &mut self,
        rows: &[FindingUpsert],
    ) -> Result<(), PassError> {
        if !self.had_findings {
            return Ok(());
        }
        #[derive(QueryableByName)]
        struct Known {
            #[diesel(sql_type = Text)]
            id: String,
            #[diesel(sql_type = Text)]
            severity: String,
            #[diesel(sql_type = Text)]
            status: String,
        }
        let known: Vec<Known> = diesel::sql_query(
            // LATERAL: one primary-key probe per id, whatever the statistics say (a table
            // the pass has just filled may have none yet, and a hash join of the batch with
            // the customer's every finding, once per batch, tripled a pass).
            "SELECT f.id, f.severity, f.status FROM unnest($2::text[]) AS b(id) \
             CROSS JOIN LATERAL (SELECT id, severity, status FROM findings \
                                 WHERE customer_id = $1 AND id = b.id) f",
        )
        .bind::<SqlUuid, _>(self.scope.customer_id().as_uuid())
        .bind::<Array<Text>, _>(rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>())
        .load(self.conn)
        .await?;
        if known.is_empty() {
            return Ok(());
        }
        let reported: std::collections::HashMap<&str, &FindingUpsert> =
            rows.iter().map(|r| (r.id.as_str(), r)).collect();
        let mut changes: Vec<(&str, &str, &str, &str)> = Vec::new();
        for old in &known {
            let Some(new) = reported.get(old.id.as_str()) else {
                continue;
            };
            if old.status != new.status.as_str() {
                changes.push((&old.id, "status", &old.status, new.status.as_str()));
            }
            if old.severity != new.severity.as_str() {
                changes.push((&old.id, "severity", &old.severity, new.severity.as_str()));
            }
        }
        if changes.is_empty() {
            return Ok(());
        }
        diesel::sql_query(
            "INSERT INTO pass_finding_changes (id, field, from_value, to_value) \
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) \
             ON CONFLICT (id, field) DO UPDATE SET to_value = EXCLUDED.to_value",
        )
        .bind::<Array<Text>, _>(changes.iter().map(|c| c.0).collect::<Vec<_>>())
        .bind::<Array<Text>, _>(changes.iter().map(|c| c.1).collect::<Vec<_>>())
        .bind::<Array<Text>, _>(changes.iter().map(|c| c.2).collect::<Vec<_>>())
        .bind::<Array<Text>, _>(changes.iter().map(|c| c.3).collect::<Vec<_>>())
        .execute(self.conn)
        .await?;
        Ok(())
    }
}
