//! A bulk triage: one change written to many findings of a customer in one transaction,
//! under the customer's lock as a single triage, with one event per finding written.

use std::collections::HashMap;

use diesel::prelude::*;
use diesel_async::{AsyncConnection as _, RunQueryDsl};
use posture_domain::{
    CustomerScope, FindingId, KeyId, Result,
    event::NewEvent,
    triage::TriageChange,
    triage_bulk::{BulkOutcome, BulkTriage},
    webhook::EventType,
};
use uuid::Uuid;

use crate::{
    PgStore,
    error::db_error,
    findings::{
        FindingRow, FindingWithIdentity, findings_with_identity, read_finding, with_comments,
    },
    identities::IdentitySummaryRow,
    schema::{findings, identities},
    triage::{Refused, Writer, announce, write_many},
};

impl PgStore {
    pub(crate) async fn write_bulk_triage(
        &self,
        scope: CustomerScope,
        items: &[(FindingId, Option<Vec<String>>)],
        change: &TriageChange,
        by: KeyId,
    ) -> Result<BulkTriage> {
        let customer = scope.customer_id().as_uuid();
        let now = self.clock.now();
        let mut conn = self.conn().await?;
        let key_name = self.key_name(&mut conn, customer, by).await?;
        let change_id = Uuid::now_v7();
        let outcomes: HashMap<String, BulkOutcome> = conn
            .transaction(async |conn| {
                let writer = Writer::locked(conn, customer, (by, key_name), now).await?;
                let modified_at = writer.modified_at;
                let targets: Vec<_> = items
                    .iter()
                    .map(|(id, expected)| (id, expected.as_deref()))
                    .collect();
                let mut outcomes = HashMap::with_capacity(items.len());
                let mut written = Vec::new();
                for ((id, _), outcome) in items
                    .iter()
                    .zip(write_many(conn, &writer, &targets, (change_id, change)).await?)
                {
                    match outcome {
                        Ok((from, _)) => written.push((id.as_str(), from)),
                        Err(Refused::NotFound) => {
                            outcomes.insert(id.as_str().to_owned(), BulkOutcome::NotFound);
                        }
                        Err(Refused::Stale) => {
                            outcomes
                                .insert(id.as_str().to_owned(), BulkOutcome::PreconditionFailed);
                        }
                    }
                }
                // The events in id order, whatever the request's.
                written.sort_unstable_by_key(|(id, _)| *id);
                if written.is_empty() {
                    return Ok(outcomes);
                }
                let events: Vec<_> = written
                    .iter()
                    .map(|(id, from)| {
                        NewEvent::triage(EventType::FindingTriaged, id, *from, change.state)
                    })
                    .collect();
                announce(conn, (customer, change_id, modified_at), &events).await?;
                let ids: Vec<&str> = written.iter().map(|(id, _)| *id).collect();
                let rows: Vec<FindingWithIdentity> = findings_with_identity!(customer)
                    .filter(findings::id.eq_any(&ids))
                    .load(conn)
                    .await?;
                let mut reads = Vec::with_capacity(rows.len());
                for row in rows {
                    let id = row.0.id.clone();
                    match read_finding(row, now) {
                        Ok(read) => reads.push(read),
                        Err(_) => {
                            outcomes.insert(id, BulkOutcome::NotFound);
                        }
                    }
                }
                for finding in with_comments(conn, customer, reads).await? {
                    let id = finding.id.as_str().to_owned();
                    outcomes.insert(id, BulkOutcome::Triaged(Box::new(finding)));
                }
                Ok::<_, diesel::result::Error>(outcomes)
            })
            .await
            .map_err(db_error)?;
        let mut outcomes = outcomes;
        Ok(BulkTriage {
            change_id,
            outcomes: items
                .iter()
                .map(|(id, _)| {
                    let outcome = outcomes
                        .remove(id.as_str())
                        .unwrap_or(BulkOutcome::NotFound);
                    (id.clone(), outcome)
                })
                .collect(),
        })
    }
}
