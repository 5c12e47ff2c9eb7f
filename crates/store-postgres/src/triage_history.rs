//! A finding's triage history keeps its newest records: older ones are deleted as new ones
//! come, with the comments (kept once per write) that no finding or record names any more.

use diesel::QueryResult;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

/// Records a finding keeps at most: older ones are deleted as new ones come.
pub const HISTORY_KEPT: i64 = 100;

/// Deletes the history records of the customer's `findings` past each one's newest
/// [`HISTORY_KEPT`], and the comments of the changes no finding and no record names any more.
/// One statement; the records it deletes are still seen by its own reads, so they are
/// excluded by hand.
pub(crate) async fn prune(
    conn: &mut AsyncPgConnection,
    customer: Uuid,
    findings: &[&str],
) -> QueryResult<usize> {
    diesel::sql_query(format!(
        "WITH excess AS ( \
             SELECT h.id, h.change_id FROM unnest($2::text[]) AS f(finding_id) \
             CROSS JOIN LATERAL ( \
                 SELECT id, change_id FROM finding_triage_history \
                 WHERE customer_id = $1 AND finding_id = f.finding_id \
                 ORDER BY id DESC OFFSET {HISTORY_KEPT}) h), \
         pruned AS ( \
             DELETE FROM finding_triage_history h USING excess \
             WHERE h.customer_id = $1 AND h.id = excess.id \
             RETURNING h.change_id) \
         DELETE FROM triage_changes c \
         WHERE c.customer_id = $1 \
           AND c.id IN (SELECT change_id FROM pruned WHERE change_id IS NOT NULL) \
           AND NOT EXISTS (SELECT 1 FROM findings f \
                           WHERE f.customer_id = $1 AND f.triage_change_id = c.id) \
           AND NOT EXISTS (SELECT 1 FROM finding_triage_history h \
                           WHERE h.customer_id = $1 AND h.change_id = c.id \
                             AND h.id NOT IN (SELECT id FROM excess))"
    ))
    .bind::<diesel::sql_types::Uuid, _>(customer)
    .bind::<diesel::sql_types::Array<diesel::sql_types::Text>, _>(findings)
    .execute(conn)
    .await
}
