//! What a pass changes of the findings the customer already had: the source of its
//! lifecycle events (`finding_resolved`, `finding_suppressed`, `finding_reopened`,
//! `finding_severity_changed`).

use diesel::{
    prelude::*,
    sql_types::{Array, Text, Uuid as SqlUuid},
};
use diesel_async::RunQueryDsl;
use posture_domain::{
    delivery::{ChangedField, FindingChange},
    event::NewEvent,
    finding::FindingUpsert,
};

use super::{PassError, PassRun};

impl PassRun<'_> {
    /// Notes each finding of `rows` whose status or severity the upsert is about to change
    /// (the first `from` of the pass is kept), for the pass's lifecycle events. Kept in
    /// memory: the pass's statements then name only the customer's tables (on Citus, the
    /// shards of one node).
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
        for old in known {
            let Some(new) = reported.get(old.id.as_str()) else {
                continue;
            };
            let severity = new.severity.as_str();
            let status = new.status.as_str();
            let fields = [
                (ChangedField::Status, old.status, status),
                (ChangedField::Severity, old.severity, severity),
            ];
            for (field, from, to) in fields {
                if from != to {
                    // A finding given twice in the pass keeps the first `from`.
                    self.changes
                        .entry((old.id.clone(), field))
                        .and_modify(|change: &mut (String, String)| change.1 = to.to_owned())
                        .or_insert((from, to.to_owned()));
                }
            }
        }
        Ok(())
    }
}

/// The changes a pass noted, per finding and field: `(from, to)`.
pub(super) type NotedChanges = std::collections::BTreeMap<(String, ChangedField), (String, String)>;

/// The lifecycle events of `changes`, in the order the pass numbers its events
/// ([`NewEvent::numbering_order`]).
pub(super) fn lifecycle_events(changes: &NotedChanges) -> Vec<NewEvent> {
    let mut events: Vec<NewEvent> = changes
        .iter()
        .filter_map(|((id, field), (from, to))| {
            let change = FindingChange {
                field: *field,
                from: from.clone(),
                to: to.clone(),
            };
            NewEvent::lifecycle(id, change)
        })
        .collect();
    events.sort_by(|a, b| a.numbering_order().cmp(&b.numbering_order()));
    events
}
