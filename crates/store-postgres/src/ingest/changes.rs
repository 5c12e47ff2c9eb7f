//! What a pass changes of the findings the customer already had: the source of its
//! lifecycle events (`finding_resolved`, `finding_suppressed`, `finding_reopened`,
//! `finding_severity_changed`).

use diesel::{
    prelude::*,
    sql_types::{Array, Text, Uuid as SqlUuid},
};
use diesel_async::RunQueryDsl;
use posture_domain::{finding::FindingUpsert, webhook::EventType};

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
                ("status", old.status, status),
                ("severity", old.severity, severity),
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

/// The lifecycle event of a change of `field` to `to`: `finding_resolved` (status became
/// resolved), `finding_suppressed` (became suppressed), `finding_reopened` (became open
/// again), `finding_severity_changed`; none for other changes.
pub(super) fn lifecycle_event(field: &str, to: &str) -> Option<&'static str> {
    match (field, to) {
        ("status", "resolved") => Some(EventType::FindingResolved.as_str()),
        ("status", "suppressed") => Some(EventType::FindingSuppressed.as_str()),
        ("status", "open") => Some(EventType::FindingReopened.as_str()),
        ("severity", _) => Some(EventType::FindingSeverityChanged.as_str()),
        _ => None,
    }
}

/// The changes a pass noted, per finding and field: `(from, to)`.
pub(super) type NotedChanges = std::collections::BTreeMap<(String, &'static str), (String, String)>;

/// The lifecycle events of `changes`, as `(event type, finding id, change)`, in the order
/// the pass numbers its events (by type, then finding id); a change back to where the
/// finding started is none.
pub(super) fn lifecycle_events(changes: &NotedChanges) -> Vec<(&'static str, &str, String)> {
    let mut events: Vec<(&'static str, &str, String)> = changes
        .iter()
        .filter(|(_, (from, to))| from != to)
        .filter_map(|((id, field), (from, to))| {
            let event = lifecycle_event(field, to)?;
            let change = serde_json::json!({"field": field, "from": from, "to": to});
            Some((event, id.as_str(), change.to_string()))
        })
        .collect();
    events.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    events
}
